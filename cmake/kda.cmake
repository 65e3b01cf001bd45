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
      gtest_discover_tests(${test_name} DISCOVERY_MODE PRE_TEST
        PROPERTIES LABELS "${name};${ARG_TEST_LABELS}" TIMEOUT 300)
    endforeach()
  endif()
endfunction()
