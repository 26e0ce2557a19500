"""The PyTorch side of test/gpu/serve.test.ts: a consumer of ``penstock serve`` through the Python
client. Prints one JSON line. Modes:

  check SOCKET FILE       every tensor of state_dict() equal to safetensors' load_file, bitwise
  restart SOCKET FILE     seconds from a ready CUDA context to the state dict ready (and, with
                          --load-file, the same for load_file)
  hold SOCKET FILE        holds a state dict until stdin closes; prints its first bytes' sum first
  make-tiny-llama - DIR   writes a small random Llama with save_pretrained (safetensors)
  transformers SOCKET DIR a transformers model built from the served state dict: logits equal to
                          from_pretrained's
"""

import json
import sys
import time

import penstock_client as pc


def ready_context():
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    return torch


def check(sock, file):
    torch = ready_context()
    from safetensors.torch import load_file

    with pc.state_dict(sock, file) as sd:
        want = load_file(file, device="cuda")
        bad = [n for n in want if n not in sd or sd[n].dtype != want[n].dtype or tuple(sd[n].shape) != tuple(want[n].shape) or not torch.equal(sd[n], want[n])]
        bad += [n for n in sd if n not in want]
        out = {"tensors": len(sd), "mismatches": bad[:20], "bytes": sum(t.numel() * t.element_size() for t in sd.values())}
    return out


def restart(sock, file, with_load_file):
    torch = ready_context()
    allocated = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    sd = pc.state_dict(sock, file)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "tensors": len(sd), "allocatedGrowth": torch.cuda.memory_allocated() - allocated}
    first = next(iter(sd.values()))
    out["ptrInMapping"] = sd.served._mapping.start <= first.data_ptr() < sd.served._mapping.start + sd.served._mapping.size
    sd.close()
    if with_load_file:
        from safetensors.torch import load_file

        t1 = time.perf_counter()
        want = load_file(file, device="cuda")
        torch.cuda.synchronize()
        out["loadFileSeconds"] = time.perf_counter() - t1
        del want
    return out


def hold(sock, file):
    torch = ready_context()
    sd = pc.state_dict(sock, file)
    first = next(iter(sd.values()))
    print(json.dumps({"held": True, "sum": int(first.flatten()[:1024].view(torch.uint8).sum().item()) if first.numel() else 0}), flush=True)
    sys.stdin.read()
    sd.close()
    return {"closed": True}


def transformers_logits(sock, folder):
    torch = ready_context()
    import transformers

    ref = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).cuda().eval()
    config = transformers.AutoConfig.from_pretrained(folder)
    # Built on the GPU so that buffers outside the state dict (rotary frequencies) are real.
    model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).cuda()
    t0 = time.perf_counter()
    sd = pc.state_dict(sock, {"path": folder + "/model.safetensors"})
    missing, unexpected = model.load_state_dict(sd, assign=True, strict=False)
    model.tie_weights()
    model = model.eval()
    seconds = time.perf_counter() - t0
    ids = torch.arange(0, 32, device="cuda").unsqueeze(0)
    with torch.no_grad():
        got, want = model(ids).logits, ref(ids).logits
    return {"equal": bool(torch.equal(got, want)), "missing": list(missing), "unexpected": list(unexpected), "seconds": seconds}


def make_tiny_llama(folder):
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    transformers.LlamaForCausalLM(config).save_pretrained(folder, safe_serialization=True)
    return {"made": folder}


def main():
    mode, sock, target = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "check":
        out = check(sock, target)
    elif mode == "restart":
        out = restart(sock, target, "--load-file" in sys.argv)
    elif mode == "hold":
        out = hold(sock, target)
    elif mode == "make-tiny-llama":
        out = make_tiny_llama(target)
    elif mode == "transformers":
        out = transformers_logits(sock, target)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
