{
  "variables": {
    "penstock_sanitize%": 0
  },
  "targets": [
    {
      "target_name": "penstock",
      "sources": [
        "src/native/sys/cuda_api.cc",
        "src/native/sys/cufile_api.cc",
        "src/native/sys/thread_pool.cc",
        "src/native/engine/device.cc",
        "src/native/sys/pinned_pages.cc",
        "src/native/js/host_memory.cc",
        "src/native/engine/job.cc",
        "src/native/engine/file_tasks.cc",
        "src/native/engine/kept_read.cc",
        "src/native/engine/issued_copy.cc",
        "src/native/engine/cufile_task.cc",
        "src/native/engine/copy_task.cc",
        "src/native/js/op_result.cc",
        "src/native/js/js_settlement.cc",
        "src/native/engine/posix_tasks.cc",
        "src/native/engine/gather_read.cc",
        "src/native/engine/mapped_read.cc",
        "src/native/engine/kept_pages.cc",
        "src/native/engine/live_operations.cc",
        "src/native/sys/stream_copy.cc",
        "src/native/sys/posix_io.cc",
        "src/native/engine/staging_pipe.cc",
        "src/native/engine/inline_read.cc",
        "src/native/engine/batch_read.cc",
        "src/native/engine/copy_batch.cc",
        "src/native/sys/read_ring.cc",
        "src/native/js/batch_bindings.cc",
        "src/native/engine/header_scan.cc",
        "src/native/js/header_bindings.cc",
        "src/native/js/instance.cc",
        "src/native/js/io_bindings.cc",
        "src/native/js/file_specs.cc",
        "src/native/js/jobs.cc",
        "src/native/js/memory_bindings.cc",
        "src/native/js/ipc_bindings.cc",
        "src/native/js/driver_bindings.cc",
        "src/native/js/background_work.cc",
        "src/native/js/kept_bindings.cc",
        "src/native/js/inline_read_bindings.cc",
        "src/native/sys/error_record.cc",
        "src/native/js/errors.cc",
        "src/native/js/addon.cc",
        "src/native/js/args.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "src/native"],
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
