// llama-server without multimodal support: the mtmd functions it links, for a server
// that never loads a projector (--mmproj). The tests serve a text model, and llama.cpp's
// mtmd library (a clip encoder and some forty vision and audio model graphs) is a third
// of what the script would otherwise compile. Loading a projector fails with a line
// saying why; with no context loaded, the server never reaches the other functions, which
// answer "nothing" (null, zero, false) all the same.
#include "mtmd.h"
#include "mtmd-helper.h"

#include <cstdio>
#include <map>

mtmd_context_params mtmd_context_params_default(void) { return {}; }
mtmd_helper_init_opt mtmd_helper_init_opt_default(void) { return {}; }
void mtmd_helper_log_set(ggml_log_callback, void *) {}

mtmd_context * mtmd_init_from_file(const char * fname, const llama_model *, const mtmd_context_params) {
    std::fprintf(stderr, "%s: this llama-server is built without multimodal support "
                 "(codemode's scripts/local-model), so it cannot load %s\n", __func__, fname);
    return nullptr;
}
mtmd_caps mtmd_get_cap_from_file(const char *) { return {}; }
std::map<ggml_backend_dev_t, size_t> mtmd_get_memory_usage(const char *, mtmd_context_params) {
    return {};
}
void mtmd_free(mtmd_context *) {}
bool mtmd_support_vision(const mtmd_context *) { return false; }
bool mtmd_support_audio(const mtmd_context *) { return false; }
bool mtmd_helper_support_video(const mtmd_context *) { return false; }

mtmd_helper_bitmap_wrapper mtmd_helper_bitmap_init_from_buf(
        const mtmd_context *, const unsigned char *, size_t, bool, mtmd_helper_init_opt) {
    return {};
}
void mtmd_bitmap_free(mtmd_bitmap *) {}
void mtmd_helper_video_free(mtmd_helper_video *) {}

int32_t mtmd_tokenize(const mtmd_context *, mtmd_input_chunks *, const mtmd_input_text *,
                      const mtmd_bitmap * const *, size_t) {
    return -1;
}
mtmd_input_chunks * mtmd_input_chunks_init(void) { return nullptr; }
void mtmd_input_chunks_free(mtmd_input_chunks *) {}
size_t mtmd_input_chunks_size(const mtmd_input_chunks *) { return 0; }
const mtmd_input_chunk * mtmd_input_chunks_get(const mtmd_input_chunks *, size_t) { return nullptr; }

mtmd_input_chunk * mtmd_input_chunk_copy(const mtmd_input_chunk *) { return nullptr; }
void mtmd_input_chunk_free(mtmd_input_chunk *) {}
const char * mtmd_input_chunk_get_id(const mtmd_input_chunk *) { return nullptr; }
llama_pos mtmd_input_chunk_get_n_pos(const mtmd_input_chunk *) { return 0; }
size_t mtmd_input_chunk_get_n_tokens(const mtmd_input_chunk *) { return 0; }
mtmd_input_chunk * mtmd_input_chunk_get_placeholder(const mtmd_input_chunk *) { return nullptr; }
const llama_token * mtmd_input_chunk_get_tokens_text(const mtmd_input_chunk *, size_t * n) {
    *n = 0;
    return nullptr;
}
mtmd_input_chunk_type mtmd_input_chunk_get_type(const mtmd_input_chunk *) {
    return MTMD_INPUT_CHUNK_TYPE_TEXT;
}
mtmd_input_chunk * mtmd_input_chunk_load(const char *, size_t) { return nullptr; }
int32_t mtmd_input_chunk_save(const mtmd_input_chunk *, char *, size_t, size_t * expected) {
    *expected = 0;
    return -1;
}

mtmd_batch * mtmd_batch_init(mtmd_context *) { return nullptr; }
void mtmd_batch_free(mtmd_batch *) {}
int32_t mtmd_batch_add_chunk(mtmd_batch *, const mtmd_input_chunk *) { return -1; }
int32_t mtmd_batch_encode(mtmd_batch *) { return -1; }
float * mtmd_batch_get_output_embd(mtmd_batch *, const mtmd_input_chunk *) { return nullptr; }
int32_t mtmd_helper_decode_image_chunk(mtmd_context *, llama_context *, const mtmd_input_chunk *,
                                       float *, llama_pos, llama_seq_id, int32_t, llama_pos *,
                                       mtmd_helper_post_decode_callback, void *) {
    return -1;
}
