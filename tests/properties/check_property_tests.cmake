# Every property in properties/src/props/registry.def has a test file of its own, tests/properties/<id>_test.cpp
# (property.h's recipe for adding a property). Fails with one line naming the files that are missing.
#   cmake -DREGISTRY=properties/src/props/registry.def -DTEST_DIR=tests/properties -P check_property_tests.cmake
foreach(var REGISTRY TEST_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_property_tests.cmake: -D${var}=... is required")
  endif()
endforeach()

file(STRINGS "${REGISTRY}" entries REGEX "^[ \t]*ATTNCHECK_PROPERTY\\([a-z0-9_]+\\)")
# No entry read means the registry's format changed: a check that finds nothing to check must not pass.
if(NOT entries)
  message(FATAL_ERROR "no ATTNCHECK_PROPERTY(id) line in ${REGISTRY}")
endif()

set(missing)
foreach(entry IN LISTS entries)
  string(REGEX REPLACE "^[ \t]*ATTNCHECK_PROPERTY\\(([a-z0-9_]+)\\).*" "\\1" id "${entry}")
  if(NOT EXISTS "${TEST_DIR}/${id}_test.cpp")
    list(APPEND missing "${id}_test.cpp")
  endif()
endforeach()

list(LENGTH entries count)
if(missing)
  list(JOIN missing ", " names)
  # The leading space keeps CMake from wrapping the message: it stays one line however many files it names.
  message(FATAL_ERROR " properties without a test file of their own in ${TEST_DIR}: ${names}")
endif()
message(STATUS "all ${count} properties of ${REGISTRY} have their own <id>_test.cpp")
