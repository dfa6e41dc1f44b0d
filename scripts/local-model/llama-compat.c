/* libllama.so for llama-cpp-python: the prebuilt libllama (linked, found next to this
 * file) plus the few functions llama-cpp-python's ctypes bindings name that this
 * llama.cpp release lacks. The bindings look every name up when llama_cpp is imported,
 * and none of its own code calls these (an extended batch API newer than the release),
 * so each stops the process with a line saying so rather than returning a wrong answer.
 */
#include <stdio.h>
#include <stdlib.h>

static void missing(const char *name) {
    fprintf(stderr, "llama-compat: %s is not in this llama.cpp release\n", name);
    abort();
}

#define MISSING(name) void name(void) { missing(#name); }

MISSING(llama_batch_ext_init)
MISSING(llama_batch_ext_free)
MISSING(llama_batch_ext_clear)
MISSING(llama_batch_ext_add)
MISSING(llama_batch_ext_add_token)
MISSING(llama_batch_ext_add_embd)
MISSING(llama_batch_ext_add_seq)
MISSING(llama_batch_ext_set_embd_token)
MISSING(llama_batch_ext_set_embd_state)
MISSING(llama_batch_ext_set_output_embd)
MISSING(llama_batch_ext_set_output_logits)
MISSING(llama_batch_ext_set_pos)
MISSING(llama_process)
MISSING(llama_get_causal_attn)
