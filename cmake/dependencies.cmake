# All dependencies come from Debian packages (or the GPU machine's system headers).
# Optional ones switch features off cleanly when missing; required ones fail configure with a clear message.

find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(Threads REQUIRED)
find_package(PkgConfig)

# toml++ (task.toml). Header-only; Debian: libtomlplusplus-dev. KDA_EXTRA_INCLUDE lets the GPU machine point at a copy.
set(KDA_EXTRA_INCLUDE "" CACHE PATH "Extra include directory searched for header-only dependencies")
find_path(TOMLPP_INCLUDE_DIR toml++/toml.h HINTS ${KDA_EXTRA_INCLUDE} REQUIRED)
add_library(kda_tomlplusplus INTERFACE)
target_include_directories(kda_tomlplusplus SYSTEM INTERFACE ${TOMLPP_INCLUDE_DIR})

# DLPack (solution ABI). Debian: libdlpack-dev.
find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h HINTS ${KDA_EXTRA_INCLUDE} REQUIRED)
add_library(kda_dlpack INTERFACE)
target_include_directories(kda_dlpack SYSTEM INTERFACE ${DLPACK_INCLUDE_DIR})

# SQLite with FTS5 (KernelWiki). Optional: the GPU machine has no SQLite.
find_package(SQLite3)

# libcurl (native LLM API backends). Optional.
find_package(CURL)

# libseccomp (runner sandbox). Optional: without it the runner relies on Landlock and audits only.
if(PkgConfig_FOUND)
  pkg_check_modules(SECCOMP IMPORTED_TARGET libseccomp)
  # The embedded interpreter for python and triton solutions (libkda-python.so). Optional: without
  # it such solutions end in a load error that says so.
  pkg_check_modules(PYTHON_EMBED IMPORTED_TARGET python3-embed)
  # cpp-httplib (`kda serve`, the dispatcher's HTTP client). Optional: without it (the GPU machine
  # unless carried) there is no `kda serve`. Debian: libcpp-httplib-dev.
  pkg_check_modules(HTTPLIB IMPORTED_TARGET cpp-httplib)
endif()

# The embedded interpreter's headers and library as one target, kda_python_embed: pkg-config's
# python3-embed (Debian), else CMake's FindPython3 for the python3 on PATH (a virtual environment
# first), which finds the GPU machine's Python, where torch lives, when it ships no .pc file.
set(KDA_HAVE_PYTHON_EMBED OFF)
if(PYTHON_EMBED_FOUND)
  add_library(kda_python_embed INTERFACE)
  target_link_libraries(kda_python_embed INTERFACE PkgConfig::PYTHON_EMBED)
  set(KDA_HAVE_PYTHON_EMBED ON)
else()
  set(Python3_FIND_VIRTUALENV FIRST)
  find_package(Python3 COMPONENTS Interpreter Development.Embed QUIET)
  if(Python3_Development.Embed_FOUND)
    add_library(kda_python_embed INTERFACE)
    target_link_libraries(kda_python_embed INTERFACE Python3::Python)
    set(KDA_HAVE_PYTHON_EMBED ON)
  endif()
endif()

if(KDA_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(KDA_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()

# CUDA is optional at configure time: without nvcc everything host-side builds and runs.
set(KDA_HAVE_CUDA OFF)
if(KDA_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit)
    if(CUDAToolkit_FOUND)
      set(KDA_HAVE_CUDA ON)
    endif()
  endif()
endif()
message(STATUS "kda: CUDA backend ${KDA_HAVE_CUDA}; SQLite ${SQLite3_FOUND}; curl ${CURL_FOUND}; seccomp ${SECCOMP_FOUND}; python ${KDA_HAVE_PYTHON_EMBED}; cpp-httplib ${HTTPLIB_FOUND}")
