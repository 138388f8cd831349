/* status.c - colibri_strerror. */
#include "colibri.h"

static const char *const messages[] = {
    [COLIBRI_OK] = "success",
    [COLIBRI_E_BAD_ARGUMENT] = "bad argument (NULL pointer, zero length or unknown mode)",
    [COLIBRI_E_BAD_MAGIC] = "not a Colibri model image (bad magic)",
    [COLIBRI_E_UNSUPPORTED_VERSION] = "unsupported image format version or flags",
    [COLIBRI_E_TRUNCATED] = "image truncated: shorter than its header says",
    [COLIBRI_E_CHECKSUM] = "checksum mismatch: image corrupted",
    [COLIBRI_E_OUT_OF_RANGE] = "tensor offset or size points past the end of the image",
    [COLIBRI_E_MISALIGNED] = "tensor or buffer not aligned as required",
    [COLIBRI_E_UNSUPPORTED_ARCH] = "unsupported architecture (family, activation, norm or qk-norm)",
    [COLIBRI_E_UNSUPPORTED_ROUTER] = "unsupported router (score function, groups or scaling)",
    [COLIBRI_E_CONFIG_MISMATCH] = "image does not match the compiled-in model configuration",
    [COLIBRI_E_TOKEN_OUT_OF_RANGE] = "token id out of range of the vocabulary",
    [COLIBRI_E_CONTEXT_FULL] = "context full: the state has no room for these tokens",
    [COLIBRI_E_WORKSPACE_TOO_SMALL] = "state or scratch memory too small",
    [COLIBRI_E_BAD_HYPERPARAMS] = "invalid or inconsistent hyper-parameters in the image header",
    [COLIBRI_E_UNSUPPORTED_DTYPE] = "unsupported tensor data type",
    [COLIBRI_E_BAD_TENSOR_TABLE] = "tensor table: tensor missing, extra, repeated or out of order",
    [COLIBRI_E_BAD_SHAPE] = "tensor shape or size does not match the hyper-parameters",
    [COLIBRI_E_OVERLAP] = "tensor data overlaps the tables or another tensor",
    [COLIBRI_E_BAD_LAYER_TABLE] = "layer table inconsistent with the tensor table",
    [COLIBRI_E_SIGNATURE] = "signature does not verify: image header, tables or block hashes "
                            "changed",
    [COLIBRI_E_BAD_KEY] = "public key is not a valid Ed25519 key",
    [COLIBRI_E_UNSIGNED] = "image is not signed: no signature block after it",
    [COLIBRI_E_BAD_SIGNATURE_BLOCK] = "signature block malformed, cut short or not this image's",
    [COLIBRI_E_HASH_MISMATCH] = "image data does not match its signed block hashes",
    [COLIBRI_E_WRONG_KEY] = "image signed by a key this device does not trust",
    [COLIBRI_E_NO_SLOT] = "no weight slot holds a bootable image",
    [COLIBRI_E_FLASH] = "flash erase or program failed, or read back wrong",
    [COLIBRI_E_SLOT_TOO_SMALL] = "image and signature block larger than the weight slot",
    [COLIBRI_E_UPDATE_ORDER] = "update step out of order (offset, size or state)",
    [COLIBRI_E_ROLLBACK] = "image version older than the running slot's (rollback refused)",
    [COLIBRI_E_QUANT_SIZE] = "quantized tensor size differs from rows x blocks x block bytes",
    [COLIBRI_E_QUANT_BLOCKS] = "quantized tensor block size or blocks per row wrong",
    [COLIBRI_E_QUANT_SCALE] = "quantized tensor has a scale that is not finite",
    [COLIBRI_E_EXPERT_UNAVAILABLE] = "the port could not give an expert's block",
    [COLIBRI_E_RESERVED] = "reserved bytes not zero (a later format feature)",
    [COLIBRI_E_UPDATE_MISMATCH] = "the image in the slot is not the bytes this update wrote",
    [COLIBRI_E_LAST_IMAGE] = "refused: that slot holds the last bootable image",
    [COLIBRI_E_ROUTER_FAILED] = "the port's router failed (returned nonzero)",
    [COLIBRI_E_BAD_ROUTE] = "the port's router chose an expert out of range or twice, or a "
                            "weight that is not finite",
};

const char *colibri_strerror(colibri_status status)
{
    unsigned index = (unsigned)status;
    if (index >= sizeof messages / sizeof messages[0] || messages[index] == NULL) {
        return "unknown status";
    }
    return messages[index];
}
