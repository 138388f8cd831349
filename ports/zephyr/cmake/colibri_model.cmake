# The model an application is built for: COLIBRI_MODEL_DIR holds the
# model_config.h and model.bin that colibri-convert wrote. The build refuses
# a model whose files disagree with each other or with the weights region,
# and writes the image as Intel HEX at the region's address.

set(COLIBRI_MODEL_DIR "$ENV{COLIBRI_MODEL_DIR}" CACHE PATH
    "Directory with model_config.h and model.bin (written by colibri-convert)")

# "0x1122334455667788" from the hex dump of little-endian bytes 88776655...
function(colibri_le_hex out hex)
  string(LENGTH "${hex}" n)
  set(value "")
  set(i 0)
  while(i LESS n)
    string(SUBSTRING "${hex}" ${i} 2 byte)
    set(value "${byte}${value}")
    math(EXPR i "${i} + 2")
  endwhile()
  set(${out} "0x${value}" PARENT_SCOPE)
endfunction()

# The value of `#define NAME 1234u` (or 0xABCDu) in model_config.h.
function(colibri_config_value out header name)
  file(STRINGS ${header} line REGEX "^#define ${name} ")
  if(NOT line)
    message(FATAL_ERROR "Colibri: ${header} does not define ${name}; "
                        "write it again with this version of colibri-convert")
  endif()
  string(REGEX REPLACE "^#define ${name} +((0x)?[0-9A-Fa-f]+)u?.*$" "\\1" value "${line}")
  math(EXPR value "${value}" OUTPUT_FORMAT DECIMAL)
  set(${out} ${value} PARENT_SCOPE)
endfunction()

function(colibri_model_fail)
  string(JOIN "" what ${ARGN})
  message(FATAL_ERROR "Colibri: ${what}\n  model: ${COLIBRI_MODEL_DIR}\n"
                      "  (set COLIBRI_MODEL_DIR to the directory colibri-convert wrote: "
                      "-DCOLIBRI_MODEL_DIR=<dir> or the environment variable)")
endfunction()

# Image header fields (docs/format.md 1): magic, image_size, meta_crc32.
function(colibri_image_header bin magic_var size_var crc_var)
  file(READ ${bin} header LIMIT 28 HEX)
  string(LENGTH "${header}" n)
  if(n LESS 56)
    colibri_model_fail("${bin} is shorter than a model image header")
  endif()
  string(SUBSTRING "${header}" 0 16 magic)
  string(SUBSTRING "${header}" 32 16 size_hex)
  string(SUBSTRING "${header}" 48 8 crc_hex)
  colibri_le_hex(size "${size_hex}")
  colibri_le_hex(crc "${crc_hex}")
  math(EXPR size "${size}" OUTPUT_FORMAT DECIMAL)
  math(EXPR crc "${crc}" OUTPUT_FORMAT DECIMAL)
  set(${magic_var} ${magic} PARENT_SCOPE)
  set(${size_var} ${size} PARENT_SCOPE)
  set(${crc_var} ${crc} PARENT_SCOPE)
endfunction()

# Sets COLIBRI_MODEL_BIN, COLIBRI_MODEL_FINGERPRINT, COLIBRI_MODEL_IMAGE_SIZE
# in the caller's scope.
macro(colibri_model_check region_addr region_size)
  if(NOT COLIBRI_MODEL_DIR)
    colibri_model_fail("COLIBRI_MODEL_DIR is not set (CONFIG_COLIBRI_MODEL=y needs a model)")
  endif()
  # (A relative -DCOLIBRI_MODEL_DIR is made absolute by set(CACHE PATH) above,
  # against the directory cmake runs in; the environment variable is not.)
  if(NOT IS_ABSOLUTE "${COLIBRI_MODEL_DIR}")
    colibri_model_fail("COLIBRI_MODEL_DIR must be an absolute path")
  endif()
  set(COLIBRI_MODEL_BIN ${COLIBRI_MODEL_DIR}/model.bin)
  set(colibri_header ${COLIBRI_MODEL_DIR}/model_config.h)
  foreach(colibri_file ${colibri_header} ${COLIBRI_MODEL_BIN})
    if(NOT EXISTS ${colibri_file})
      colibri_model_fail("${colibri_file} does not exist")
    endif()
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
               ${colibri_header} ${COLIBRI_MODEL_BIN})
  colibri_check_model_files(${region_addr} ${region_size})
endmacro()

function(colibri_check_model_files region_addr region_size)
  set(header ${COLIBRI_MODEL_DIR}/model_config.h)
  set(bin ${COLIBRI_MODEL_DIR}/model.bin)
  colibri_config_value(fingerprint ${header} COLIBRI_MODEL_FINGERPRINT)
  colibri_config_value(image_size ${header} COLIBRI_MODEL_IMAGE_SIZE)
  colibri_config_value(alignment ${header} COLIBRI_MODEL_ALIGNMENT)
  colibri_image_header(${bin} magic bin_size bin_crc)
  file(SIZE ${bin} file_size)
  math(EXPR misaligned "${region_addr} % ${alignment}")
  math(EXPR fingerprint_hex "${fingerprint}" OUTPUT_FORMAT HEXADECIMAL)
  math(EXPR bin_crc_hex "${bin_crc}" OUTPUT_FORMAT HEXADECIMAL)
  if(NOT magic STREQUAL "434f4c494252491a")
    colibri_model_fail("${bin} is not a Colibri model image (magic ${magic})")
  elseif(NOT bin_crc EQUAL fingerprint)
    colibri_model_fail("model.bin fingerprint ${bin_crc_hex} != model_config.h "
                       "COLIBRI_MODEL_FINGERPRINT ${fingerprint_hex}: files from two conversions")
  elseif(NOT bin_size EQUAL image_size OR file_size LESS bin_size)
    colibri_model_fail("model.bin size ${file_size} (header: ${bin_size}) != model_config.h "
                       "COLIBRI_MODEL_IMAGE_SIZE ${image_size}")
  elseif(image_size GREATER region_size)
    colibri_model_fail("the image (${image_size} bytes) does not fit the weights region "
                       "at ${region_addr} (${region_size} bytes)")
  elseif(NOT misaligned EQUAL 0)
    colibri_model_fail("weights address ${region_addr} is not a multiple of the model's "
                       "alignment ${alignment}")
  endif()
  message(STATUS "Colibri: model ${bin} (${image_size} bytes, fingerprint ${fingerprint_hex})")
endfunction()

# Before the link: do the application's model buffers fit the board's SRAM?
# Each of CONFIG_COLIBRI_MODEL_INSTANCES sets of buffers holds the KV state
# (linear in the context), the scratch and the logits, at the context the
# model was converted for; CONFIG_COLIBRI_RAM_RESERVE bytes are left for the
# kernel, the stacks and the rest of the application. When they do not fit,
# the message names the largest context that does (the linker still has the
# last word on everything else).
function(colibri_model_ram_check)
  dt_chosen(sram_path PROPERTY "zephyr,sram")
  if(NOT sram_path)
    return()
  endif()
  dt_reg_size(sram_size PATH ${sram_path})
  if(NOT sram_size)
    return()
  endif()
  math(EXPR sram_size "${sram_size}" OUTPUT_FORMAT DECIMAL)
  set(header ${COLIBRI_MODEL_DIR}/model_config.h)
  colibri_config_value(context ${header} COLIBRI_MODEL_CONTEXT)
  colibri_config_value(max_context ${header} COLIBRI_MODEL_MAX_CONTEXT)
  colibri_config_value(state ${header} COLIBRI_MODEL_STATE_BYTES)
  colibri_config_value(scratch ${header} COLIBRI_MODEL_SCRATCH_BYTES)
  colibri_config_value(vocab ${header} COLIBRI_MODEL_VOCAB_SIZE)
  set(sets ${CONFIG_COLIBRI_MODEL_INSTANCES})
  set(reserve ${CONFIG_COLIBRI_RAM_RESERVE})
  math(EXPR per_set "${state} + ${scratch} + 4 * ${vocab}")
  math(EXPR need "${sets} * ${per_set}")
  math(EXPR room "${sram_size} - ${reserve}")
  if(need LESS_EQUAL room)
    message(STATUS "Colibri: model buffers ${need} bytes (${sets} x state ${state} + scratch "
                   "${scratch} + logits) of ${sram_size} bytes SRAM, ${reserve} reserved")
    return()
  endif()
  # State bytes are linear in the context; the scratch at the converted
  # context bounds the scratch of any smaller one.
  math(EXPR per_position "${state} / ${context}")
  math(EXPR spare "${room} - ${sets} * (${scratch} + 4 * ${vocab})")
  set(fit 0)
  if(spare GREATER 0)
    math(EXPR fit "${spare} / (${sets} * ${per_position})")
  endif()
  if(fit GREATER max_context)
    set(fit ${max_context})
  endif()
  if(fit LESS 1)
    set(advice "No context fits: the scratch and logits alone exceed it.")
  else()
    set(advice "The largest context that fits is ${fit}: convert again with "
               "colibri-convert ... --context ${fit}.")
  endif()
  string(JOIN "" advice ${advice})
  colibri_model_fail(
    "the model's RAM buffers do not fit ${BOARD}${BOARD_QUALIFIERS}: ${sets} x (KV state "
    "${state} bytes for context ${context} + scratch ${scratch} + logits) = ${need} bytes, "
    "but the SRAM is ${sram_size} bytes and CONFIG_COLIBRI_RAM_RESERVE keeps ${reserve} of "
    "them for the kernel and the application. ${advice}")
endfunction()

# zephyr/colibri_weights.hex (the image at the region's address),
# zephyr/colibri_weights.json (what a flasher needs to know), and, with
# CONFIG_BUILD_OUTPUT_HEX, merged.hex (firmware + weights) through Zephyr's
# HEX_FILES_TO_MERGE.
function(colibri_weights_outputs addr size)
  set(out ${PROJECT_BINARY_DIR})
  set(hex ${out}/colibri_weights.hex)
  add_custom_command(
    OUTPUT ${hex}
    COMMAND ${CMAKE_OBJCOPY} -I binary -O ihex --change-addresses ${addr}
            ${COLIBRI_MODEL_BIN} ${hex}
    DEPENDS ${COLIBRI_MODEL_BIN}
    COMMENT "Colibri: model.bin as Intel HEX at ${addr}"
  )
  add_custom_target(colibri_weights_hex ALL DEPENDS ${hex})
  file(SIZE ${COLIBRI_MODEL_BIN} image_size)
  file(CONFIGURE OUTPUT ${out}/colibri_weights.json CONTENT
"{
  \"address\": \"${addr}\",
  \"region_size\": ${size},
  \"image\": \"${COLIBRI_MODEL_BIN}\",
  \"image_size\": ${image_size},
  \"hex\": \"${hex}\",
  \"board\": \"${BOARD}${BOARD_QUALIFIERS}\"
}
")
  if(CONFIG_BUILD_OUTPUT_HEX)
    set_property(GLOBAL APPEND PROPERTY HEX_FILES_TO_MERGE ${out}/${KERNEL_HEX_NAME} ${hex})
  endif()
endfunction()
