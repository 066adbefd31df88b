# How this project builds llama-cpp-python, which PyPI ships only as source:
#   CMAKE_ARGS=-DCMAKE_PROJECT_INCLUDE=<this file> pip install llama-cpp-python==...
# (scripts/bootstrap; ops_tools/deploy/local_engines.py and ops_tools/containers/images.py
# when pip's cache lacks the wheel). CMake includes it after every project() of the build; the
# normal variables below shadow the options and cache entries of the same names (policies
# CMP0077 and CMP0126, which the build's CMake 3.21 minimum sets).

# Native code, but no AMX: the virtual Xeons this project runs on report AMX, which gcc's
# -march=native then enables, yet refuse its instructions (the engine died of SIGILL, at a
# tilezero, on its first request). GCC's explicit -mno-* flags win over -march's whatever
# their order.
add_compile_options(-mno-amx-tile -mno-amx-int8 -mno-amx-bf16)

# Nothing of this project loads them: multimodal models (libmtmd), and llama.cpp's common
# library with the HTTP client it links, which llama-cpp-python forces on (a cache entry with
# FORCE, which -D cannot override) though its Python package loads only libllama and libggml.
# Without them the build takes 6 CPU-minutes instead of 13.
set(LLAVA_BUILD OFF)
set(LLAMA_BUILD_COMMON OFF)

# libllama (model loading, graph building, vocabulary, sampling: host code, none of the maths
# kernels) at -O1; ggml keeps the build's -O3. It is a third of the compile, and this takes the
# wheel from 250 to 205 CPU-s (145 to 111 s) with the same text at temperature 0 and the same
# tokens per second (docs/benchmarks.md). A compile option appended after the configuration's
# flags wins (gcc takes the last -O). The llama target exists only once the top-level
# directory is processed, so the call is deferred to its end, once for the whole build.
get_property(_net_llama_o1 GLOBAL PROPERTY NET_LLAMA_O1)
if(NOT _net_llama_o1)
  set_property(GLOBAL PROPERTY NET_LLAMA_O1 TRUE)
  function(_net_llama_host_code_o1)
    if(TARGET llama)
      target_compile_options(llama PRIVATE -O1)
    endif()
  endfunction()
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _net_llama_host_code_o1)
endif()
