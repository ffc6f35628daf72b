# libFuzzer targets for every file reader (RLX_FUZZ=ON, clang only; `make
# test-asan` and `make fuzz` configure build-asan with it). With RLX_SANITIZE
# every layer is already compiled with the fuzzer's coverage and ASan + UBSan
# (CMakeLists.txt), so the targets link the layers themselves: one sanitized
# tree for the unit tests and the fuzzers. Without it, each layer a target
# needs is compiled once more into an instrumented library of its own.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES Clang)
  message(FATAL_ERROR "RLX_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
endif()
set(RLX_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                   -fno-omit-frame-pointer)
set(RLX_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)

# rlx_fuzz_<name>: the layer (or part of one) a target reads with.
function(rlx_fuzz_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS;LAYER" ${ARGN})
  if(RLX_SANITIZE)
    add_library(rlx_fuzz_${name} INTERFACE)
    target_link_libraries(rlx_fuzz_${name} INTERFACE ${L_LAYER})
    target_include_directories(rlx_fuzz_${name} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    return()
  endif()
  set(srcs)
  foreach(pattern ${L_SOURCES})
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${pattern})
    list(APPEND srcs ${found})
  endforeach()
  add_library(rlx_fuzz_${name} STATIC EXCLUDE_FROM_ALL ${srcs})
  target_include_directories(rlx_fuzz_${name} PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(rlx_fuzz_${name} PRIVATE ${RLX_FUZZ_FLAGS})
  target_link_libraries(rlx_fuzz_${name} PUBLIC ${L_DEPS} nlohmann_json::nlohmann_json)
endfunction()

rlx_fuzz_layer(core SOURCES src/core/*.cc DEPS Threads::Threads LAYER rlx_core)
rlx_fuzz_layer(quant SOURCES src/quant/*.cc DEPS rlx_fuzz_core LAYER rlx_quant)
rlx_fuzz_layer(io SOURCES src/io/*.cc src/io/gguf/*.cc src/io/onnx/*.cc
               DEPS rlx_fuzz_quant rlx_fuzz_core protobuf::libprotobuf LAYER rlx_io)
rlx_fuzz_layer(ir SOURCES src/ir/*.cc DEPS rlx_fuzz_quant rlx_fuzz_core LAYER rlx_ir)
rlx_fuzz_layer(torch SOURCES src/frontends/torch/*.cc DEPS rlx_fuzz_ir rlx_fuzz_io
               LAYER rlx_frontends)
# ONNX import: the onnx frontend (it shares ImportInternalError with torch).
rlx_fuzz_layer(onnx SOURCES src/frontends/onnx/*.cc DEPS rlx_fuzz_torch rlx_fuzz_ir rlx_fuzz_io
               LAYER rlx_frontends)
# The MIL interpreter and what it uses of the CoreML backend: the MIL type
# helpers and the generated protobuf code.
rlx_fuzz_layer(mil_interp SOURCES src/backends/coreml/interp/*.cc src/backends/coreml/mil.cc
               DEPS rlx_fuzz_io protobuf::libprotobuf LAYER rlx_backend_coreml)
if(NOT RLX_SANITIZE)
  # The generated protobuf code, instrumented like the rest (so the fuzzer
  # sees which message fields it reached).
  target_sources(rlx_fuzz_io PRIVATE ${RLX_ONNX_PROTO_OUT}/onnx.pb.cc)
  target_include_directories(rlx_fuzz_io PRIVATE ${RLX_ONNX_PROTO_OUT})
  target_sources(rlx_fuzz_mil_interp PRIVATE ${RLX_PROTO_SRCS})
  target_include_directories(rlx_fuzz_mil_interp PUBLIC ${RLX_PROTO_OUT})
endif()

add_custom_target(rlx_fuzz)
foreach(spec safetensors:io npy:io gguf:io graph_json:ir torch_ir:torch mlpackage:mil_interp
        onnx:onnx)
  string(REPLACE ":" ";" parts ${spec})
  list(GET parts 0 name)
  list(GET parts 1 layer)
  add_executable(fuzz_${name} EXCLUDE_FROM_ALL ${RLX_FUZZ_DIR}/fuzz_${name}.cc)
  target_compile_options(fuzz_${name} PRIVATE ${RLX_FUZZ_FLAGS})
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_${name} PRIVATE rlx_fuzz_${layer})
  add_dependencies(rlx_fuzz fuzz_${name})
endforeach()
