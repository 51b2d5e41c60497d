# cmake -P script run by the install test; see CMakeLists.txt.
# Inputs: TETHER_BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR GENERATOR C_COMPILER
#         CXX_COMPILER BUILD_TYPE SANITIZE EXPECTED_VERSION
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: ${what} failed (${rc})")
  endif()
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install "${TETHER_BUILD_DIR}" --prefix "${prefix}")

# What a consumer needs is there, and nothing of the internal core.
foreach(f include/tether/tether.h include/tether/tether.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "install test: ${f} was not installed")
  endif()
endforeach()
file(GLOB_RECURSE config "${prefix}/*/tetherConfig.cmake")
file(GLOB_RECURSE core_headers "${prefix}/include/tether_core/*")
if(NOT config)
  message(FATAL_ERROR "install test: tetherConfig.cmake was not installed")
endif()
if(core_headers)
  message(FATAL_ERROR "install test: internal headers were installed: ${core_headers}")
endif()

set(flags "")
if(SANITIZE)
  # A sanitized libtether needs the consumer to link the sanitizer runtime too.
  set(flags "-fsanitize=${SANITIZE}")
endif()
step("configuring the consumer" ${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
  "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}"
  "-DCMAKE_C_FLAGS=${flags}" "-DCMAKE_CXX_FLAGS=${flags}"
  "-DCMAKE_EXE_LINKER_FLAGS=${flags}"
  "-DEXPECTED_VERSION=${EXPECTED_VERSION}"
  "-DEXPECTED_PREFIX=${prefix}")
step("building the consumer" ${CMAKE_COMMAND} --build "${build}")
step("running the consumer" "${build}/app")
message(STATUS "install test: consumer built against ${prefix} and ran")
