# A/B weight slots (CONFIG_COLIBRI_SLOTS, docs/zephyr.md section 8).

# The slots partition, resolved as include/colibri_zephyr.h resolves it in C:
# the chosen "colibri,slots" node, else the node labelled colibri_slots; a
# fixed-partitions child. Stops the configuration when there is none.
function(colibri_slots_partition)
  dt_chosen(node PROPERTY "colibri,slots")
  set(source "chosen colibri,slots")
  if(NOT DEFINED node)
    dt_nodelabel(node NODELABEL "colibri_slots")
    set(source "node label colibri_slots")
  endif()
  if(NOT DEFINED node)
    message(FATAL_ERROR "Colibri: CONFIG_COLIBRI_SLOTS needs a slots partition in the devicetree: "
            "a fixed partition labelled colibri_slots (or the chosen property colibri,slots "
            "pointing at one), in memory-mapped flash; docs/zephyr.md section 8 shows one")
  endif()
  string(REGEX REPLACE "/[^/]*$" "" parent "${node}")
  dt_comp_path(partitions COMPATIBLE "fixed-partitions")
  if(NOT "${parent}" IN_LIST partitions)
    message(FATAL_ERROR "Colibri: the slots node ${node} (${source}) is not a partition: its "
            "parent ${parent} is not compatible with \"fixed-partitions\"")
  endif()
  dt_reg_addr(offset PATH ${node})
  dt_reg_size(size PATH ${node})
  math(EXPR offset "${offset}" OUTPUT_FORMAT HEXADECIMAL)
  math(EXPR size "${size}" OUTPUT_FORMAT DECIMAL)
  message(STATUS "Colibri: A/B slots in ${node} (${source}): offset ${offset}, ${size} bytes")
endfunction()

# The Ed25519 key A/B slot images must be signed with (docs/ota.md): the CMake
# variable (or environment variable) COLIBRI_TRUSTED_KEY names a PEM public key
# (colibri-sign keygen writes one); unset or "none": unsigned images are
# accepted too. colibri_trusted_key.h is written by the same tool as for bare
# metal (python -m colibri_tools.image.signing header), and again when the key
# file changes.

set(COLIBRI_TRUSTED_KEY "$ENV{COLIBRI_TRUSTED_KEY}" CACHE STRING
    "PEM public key A/B slot images must be signed with, or none")

function(colibri_trusted_key_header dir)
  set(key "${COLIBRI_TRUSTED_KEY}")
  if(key STREQUAL "")
    set(key none)
  endif()
  if(NOT key STREQUAL "none")
    get_filename_component(key "${key}" ABSOLUTE BASE_DIR ${APPLICATION_SOURCE_DIR})
    if(NOT EXISTS "${key}")
      message(FATAL_ERROR "Colibri: COLIBRI_TRUSTED_KEY=${COLIBRI_TRUSTED_KEY}: no such file")
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${key})
  endif()
  file(MAKE_DIRECTORY ${dir})
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${COLIBRI_ROOT}/tools
            ${PYTHON_EXECUTABLE} -m colibri_tools.image.signing header ${key}
            -o ${dir}/colibri_trusted_key.h
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "Colibri: cannot write colibri_trusted_key.h from ${key}:\n${out}")
  endif()
  message(STATUS "Colibri: slot images must be signed by: ${key}")
endfunction()
