# kda_discover_tests(<target> LABELS <label>... TIMEOUT <s> [TEST_FILTER <filter>])
# gtest_discover_tests with its labels as ONE label joined by '-' (eval-gpu, tune-slow): CMake 3.25's
# discovery writes PROPERTIES as a flat list, so a second label became a property name and the TIMEOUT
# after it was lost. `ctest -L` / `-LE` match a regular expression, so -L slow still selects tune-slow
# and the presets' gpu exclusion still excludes eval-gpu.
#
# The binaries whose tests take longest, with about how long their longest test takes on the 2-core
# machine (seconds; `ctest` prints each test's time): their tests get that as their COST, so `ctest -j`
# starts them first on a fresh checkout too, where it has no timings of an earlier run. Started last,
# the 100-second tuner run kept one core busy alone for the last minute and a half of CI's tests.
set(kda_long_test_binaries
    tuner_run_e2e_test 100  loop_e2e_test 80  tune_e2e_test 35  python_solution_test 30  integrity_test 30
    report_chromium_test 25  monitor_tmux_test 25  exec_test 20  solution_init_test 13  builder_test 12
    eval_test 11  run_loop_test 9)
function(kda_test_cost target out_var)
  list(FIND kda_long_test_binaries ${target} at)
  set(cost 0)
  if(at GREATER_EQUAL 0)
    math(EXPR at "${at} + 1")
    list(GET kda_long_test_binaries ${at} cost)
  endif()
  set(${out_var} ${cost} PARENT_SCOPE)
endfunction()

function(kda_discover_tests target)
  cmake_parse_arguments(ARG "" "TIMEOUT;TEST_FILTER" "LABELS" ${ARGN})
  list(JOIN ARG_LABELS "-" label)
  set(filter)
  if(ARG_TEST_FILTER)
    set(filter TEST_FILTER "${ARG_TEST_FILTER}")
  endif()
  kda_test_cost(${target} cost)
  gtest_discover_tests(${target} DISCOVERY_MODE PRE_TEST ${filter} PROPERTIES LABELS "${label}" TIMEOUT ${ARG_TIMEOUT}
                       COST ${cost})
endfunction()

# kda_module(<name> SOURCES ... [DEPS ...] [TESTS ...] [TEST_DEPS ...] [TEST_LABELS ...])
# Declares the static library kda_<name> and, for each test source, a GoogleTest executable.
function(kda_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;TESTS;TEST_DEPS;TEST_LABELS" ${ARGN})
  add_library(kda_${name} STATIC ${ARG_SOURCES})
  target_include_directories(kda_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(kda_${name} PUBLIC ${ARG_DEPS})
  if(KDA_BUILD_TESTS)
    foreach(test_src IN LISTS ARG_TESTS)
      get_filename_component(test_name ${test_src} NAME_WE)
      add_executable(${test_name} ${test_src})
      target_link_libraries(${test_name} PRIVATE kda_${name} ${ARG_TEST_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
      target_compile_definitions(${test_name} PRIVATE
        KDA_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KDA_BINARY_DIR="${PROJECT_BINARY_DIR}")
      kda_discover_tests(${test_name} LABELS ${name} ${ARG_TEST_LABELS} TIMEOUT 300)
    endforeach()
  endif()
endfunction()

# kda_cuda_object(<out_var> <source.cu> [DEPENDS files...])
# Compiles one .cu file with nvcc into a position-independent object for a host target (no CMake CUDA
# language setup needed). Code for the first of CMAKE_CUDA_ARCHITECTURES (default 90a) plus compute_80
# PTX, so a newer GPU can JIT it. Host compiler: the project's C++ compiler.
function(kda_cuda_object out_var source)
  cmake_parse_arguments(ARG "" "" "DEPENDS" ${ARGN})
  set(arch 90a)
  if(CMAKE_CUDA_ARCHITECTURES AND NOT CMAKE_CUDA_ARCHITECTURES MATCHES "^(all|all-major|native)$")
    list(GET CMAKE_CUDA_ARCHITECTURES 0 arch)
  endif()
  get_filename_component(base ${source} NAME_WE)
  set(object ${CMAKE_CURRENT_BINARY_DIR}/${base}.cu.o)
  add_custom_command(OUTPUT ${object}
    COMMAND ${CMAKE_CUDA_COMPILER} -ccbin ${CMAKE_CXX_COMPILER} -std=c++20 -O3 -Xcompiler -fPIC
            -gencode=arch=compute_${arch},code=sm_${arch} -gencode=arch=compute_80,code=compute_80
            -I${PROJECT_SOURCE_DIR}/src -I${DLPACK_INCLUDE_DIR} -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${object}
    DEPENDS ${source} ${ARG_DEPENDS}
    COMMENT "nvcc ${source} (sm_${arch})"
    VERBATIM)
  set(${out_var} ${object} PARENT_SCOPE)
endfunction()
