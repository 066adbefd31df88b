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
