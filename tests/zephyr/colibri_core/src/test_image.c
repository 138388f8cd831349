/*
 * test_image.c - the weights region and the image in it: the image lies at
 * the devicetree address (loaded there by QEMU or mapped by native_sim), it
 * initialises and verifies, and a wrong fingerprint is refused.
 */
#include <string.h>

#include <zephyr/devicetree.h>
#include <zephyr/ztest.h>

#include "colibri_test.h"
#include "colibri_zephyr.h"

ZTEST(colibri, test_weights_region_comes_from_devicetree)
{
    zassert_true(DT_HAS_CHOSEN(colibri_weights), "no chosen colibri,weights in the overlay");
    zassert_equal((uintptr_t)colibri_zephyr_weights(),
                  (uintptr_t)DT_REG_ADDR(DT_CHOSEN(colibri_weights)));
    zassert_equal(colibri_zephyr_weights_size(), DT_REG_SIZE(DT_CHOSEN(colibri_weights)));
    zassert_str_equal(COLIBRI_ZEPHYR_WEIGHTS_SOURCE, "devicetree");
}

ZTEST(colibri, test_image_lies_at_the_weights_address)
{
    static const uint8_t magic[8] = {'C', 'O', 'L', 'I', 'B', 'R', 'I', 0x1A};
    zassert_mem_equal(colibri_zephyr_weights(), magic, sizeof magic, "no model image at 0x%lx",
                      (unsigned long)COLIBRI_ZEPHYR_WEIGHTS_ADDRESS);
    zassert_equal((const void *)test_model.image, colibri_zephyr_weights());
    zassert_equal(test_model.image_size, COLIBRI_MODEL_IMAGE_SIZE);
    zassert_equal(test_model.fingerprint, COLIBRI_MODEL_FINGERPRINT);
}

ZTEST(colibri, test_verify_reads_every_tensor)
{
    uint32_t bad = UINT32_MAX;
    zassert_ok(colibri_verify(&test_model, &bad), "tensor %u has a bad CRC", bad);
}

ZTEST(colibri, test_wrong_fingerprint_is_refused)
{
    colibri_model other;
    colibri_options options = {COLIBRI_MODEL_FINGERPRINT ^ 1u, NULL};
    colibri_status s =
        colibri_init(&other, colibri_zephyr_weights(), colibri_zephyr_weights_size(), &options);
    zassert_equal(s, COLIBRI_E_CONFIG_MISMATCH, "got %s", colibri_strerror(s));
}

ZTEST(colibri, test_region_shorter_than_image_is_refused)
{
    colibri_model other;
    colibri_status s =
        colibri_init(&other, colibri_zephyr_weights(), COLIBRI_MODEL_IMAGE_SIZE - 1, NULL);
    zassert_equal(s, COLIBRI_E_TRUNCATED, "got %s", colibri_strerror(s));
}
