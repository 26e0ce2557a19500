{
  "variables": {
    "penstock_sanitize%": 0
  },
  "targets": [
    {
      "target_name": "penstock",
      "sources": [
        "src/native/cuda_api.cc",
        "src/native/cufile_api.cc",
        "src/native/thread_pool.cc",
        "src/native/device.cc",
        "src/native/host_memory.cc",
        "src/native/io_op.cc",
        "src/native/issued_copy.cc",
        "src/native/cufile_task.cc",
        "src/native/copy_task.cc",
        "src/native/op_result.cc",
        "src/native/js_settlement.cc",
        "src/native/posix_tasks.cc",
        "src/native/gather_read.cc",
        "src/native/mapped_read.cc",
        "src/native/kept_pages.cc",
        "src/native/stream_copy.cc",
        "src/native/posix_io.cc",
        "src/native/staging_pipe.cc",
        "src/native/inline_read.cc",
        "src/native/batch_op.cc",
        "src/native/copy_batch.cc",
        "src/native/read_ring.cc",
        "src/native/batch_bindings.cc",
        "src/native/instance.cc",
        "src/native/io_bindings.cc",
        "src/native/memory_bindings.cc",
        "src/native/ipc_bindings.cc",
        "src/native/error_record.cc",
        "src/native/errors.cc",
        "src/native/addon.cc",
        "src/native/args.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Wno-missing-field-initializers", "-fvisibility=hidden"],
      "libraries": ["-ldl", "-lpthread"],
      "conditions": [
        ["penstock_sanitize==1", {
          "cflags_cc": ["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=undefined,float-cast-overflow", "-fno-omit-frame-pointer", "-g", "-O1"],
          "ldflags": ["-fsanitize=address,undefined,float-cast-overflow"]
        }]
      ]
    }
  ]
}
