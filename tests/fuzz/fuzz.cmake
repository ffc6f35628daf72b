# libFuzzer targets for every file reader (RLX_FUZZ=ON, clang only; `make
# fuzz` configures build-fuzz with it). Each layer a target needs is compiled
# once more, into a static library of its own, with the fuzzer's coverage
# instrumentation and ASan + UBSan; only these libraries and the targets are
# built (`cmake --build build-fuzz --target rlx_fuzz`), never the whole tree.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES Clang)
  message(FATAL_ERROR "RLX_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
endif()
set(RLX_FUZZ_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                   -fno-omit-frame-pointer)
set(RLX_FUZZ_DIR ${CMAKE_SOURCE_DIR}/tests/fuzz)

function(rlx_fuzz_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS" ${ARGN})
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

rlx_fuzz_layer(core SOURCES src/core/*.cc DEPS Threads::Threads)
rlx_fuzz_layer(quant SOURCES src/quant/*.cc DEPS rlx_fuzz_core)
rlx_fuzz_layer(io SOURCES src/io/*.cc src/io/gguf/*.cc src/io/onnx/*.cc
               DEPS rlx_fuzz_quant rlx_fuzz_core protobuf::libprotobuf)
# The ONNX reader's generated protobuf code, instrumented like the rest.
target_sources(rlx_fuzz_io PRIVATE ${RLX_ONNX_PROTO_OUT}/onnx.pb.cc)
target_include_directories(rlx_fuzz_io PRIVATE ${RLX_ONNX_PROTO_OUT})
rlx_fuzz_layer(ir SOURCES src/ir/*.cc DEPS rlx_fuzz_quant rlx_fuzz_core)
rlx_fuzz_layer(torch SOURCES src/frontends/torch/*.cc DEPS rlx_fuzz_ir rlx_fuzz_io)
# ONNX import: the onnx frontend (it shares ImportInternalError with torch).
rlx_fuzz_layer(onnx SOURCES src/frontends/onnx/*.cc DEPS rlx_fuzz_torch rlx_fuzz_ir rlx_fuzz_io)
# The MIL interpreter and what it uses of the CoreML backend: the MIL type
# helpers and the generated protobuf code (instrumented too, so the fuzzer
# sees which message fields it reached).
rlx_fuzz_layer(mil_interp SOURCES src/backends/coreml/interp/*.cc src/backends/coreml/mil.cc
               DEPS rlx_fuzz_io protobuf::libprotobuf)
target_sources(rlx_fuzz_mil_interp PRIVATE ${RLX_PROTO_SRCS})
target_include_directories(rlx_fuzz_mil_interp PUBLIC ${RLX_PROTO_OUT})

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
