#include "engine/issued_copy.h"

#include "engine/device.h"

namespace penstock {

namespace {

// The lane's stream (made on first use) and an idle event, with the device's context current.
ErrorRecord TakeEvent(IssueLane& lane, CUstream* stream, CUevent* event) {
  std::lock_guard<std::mutex> lock(lane.mutex);
  if (!lane.stream) {
    CUstream s = nullptr;
    ErrorRecord e = PENSTOCK_CUDA(StreamCreate, &s, CU_STREAM_NON_BLOCKING);
    if (!e.ok()) return e;
    lane.stream = s;
  }
  *stream = lane.stream;
  if (!lane.idle.empty()) {
    *event = lane.idle.back();
    lane.idle.pop_back();
    return {};
  }
  return PENSTOCK_CUDA(EventCreate, event, CU_EVENT_DISABLE_TIMING);
}

void GiveEvent(IssueLane& lane, CUevent event) {
  std::lock_guard<std::mutex> lock(lane.mutex);
  lane.idle.push_back(event);
}

}  // namespace

ErrorRecord IssuedCopy::Issue(DeviceState* d, CUdeviceptr dst, const void* src, uint64_t size,
                              std::shared_ptr<const void> source, std::unique_ptr<IssuedCopy>* out) {
  CUstream stream = nullptr;
  CUevent event = nullptr;
  ErrorRecord e = TakeEvent(d->issue, &stream, &event);
  if (!e.ok()) return e;
  e = PENSTOCK_CUDA(MemcpyHtoDAsync, dst, src, size, stream);
  if (e.ok()) e = PENSTOCK_CUDA(EventRecord, event, stream);
  if (!e.ok()) {
    // A copy queued without its event is waited for here, before its source may go.
    Cuda().StreamSynchronize(stream);
    GiveEvent(d->issue, event);
    return e;
  }
  std::unique_ptr<IssuedCopy> c(new IssuedCopy());
  c->device_ = d;
  c->done_ = event;
  c->source_ = std::move(source);
  *out = std::move(c);
  return {};
}

ErrorRecord IssuedCopy::Wait() {
  waited_ = true;
  // Any worker may wait, including one that never made this GPU's context current.
  ContextGuard guard(device_->ctx);
  return PENSTOCK_CUDA(EventSynchronize, done_);
}

IssuedCopy::~IssuedCopy() {
  if (!waited_) {
    ContextGuard guard(device_->ctx);
    Cuda().EventSynchronize(done_);
  }
  GiveEvent(device_->issue, done_);
}

}  // namespace penstock
