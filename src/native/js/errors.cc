#include "js/errors.h"

namespace penstock {

Napi::Object ToJs(Napi::Env env, const ErrorRecord& e) {
  static const char* kinds[] = {"none", "os", "cuda", "cufile", "penstock", "abort"};
  Napi::Object o = Napi::Object::New(env);
  o.Set("kind", kinds[static_cast<int>(e.kind)]);
  o.Set("code", e.code);
  o.Set("message", e.message);
  if (e.kind == ErrorRecord::Kind::Os) o.Set("errno", e.number);
  if (e.kind == ErrorRecord::Kind::Cuda || e.kind == ErrorRecord::Kind::CuFile) o.Set("number", e.number);
  if (!e.syscall.empty()) o.Set("syscall", e.syscall);
  return o;
}

void ThrowRecord(Napi::Env env, const ErrorRecord& e) {
  Napi::Error err = Napi::Error::New(env, e.message);
  err.Set("record", ToJs(env, e));
  throw err;
}

}  // namespace penstock
