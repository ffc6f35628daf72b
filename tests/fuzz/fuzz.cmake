# libFuzzer targets for every file reader (RLX_FUZZ=ON; `make test-asan` and
# `make fuzz` configure build-asan with it through scripts/configure-sanitize.sh).
# RLX_SANITIZE compiles every layer with the fuzzer's coverage and ASan + UBSan
# (CMakeLists.txt), so the targets link the layers themselves: one sanitized
# tree for the unit tests and the fuzzers.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES Clang OR NOT RLX_SANITIZE)
  message(FATAL_ERROR "RLX_FUZZ needs clang (libFuzzer) and RLX_SANITIZE=ON: configure with "
                      "scripts/configure-sanitize.sh")
endif()
set(RLX_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)

add_custom_target(rlx_fuzz)
# target:layer it reads with
foreach(spec safetensors:io npy:io gguf:io graph_json:ir torch_ir:frontends
        mlpackage:backend_coreml onnx:frontends)
  string(REPLACE ":" ";" parts ${spec})
  list(GET parts 0 name)
  list(GET parts 1 layer)
  add_executable(fuzz_${name} EXCLUDE_FROM_ALL ${RLX_FUZZ_DIR}/fuzz_${name}.cc)
  target_include_directories(fuzz_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_${name} PRIVATE rlx_${layer})
  add_dependencies(rlx_fuzz fuzz_${name})
endforeach()
