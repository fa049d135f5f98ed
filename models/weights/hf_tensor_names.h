// Hugging Face Llama tensor names <-> Loom's canonical (GGUF) names.
//   model.embed_tokens.weight                    <-> token_embd.weight
//   model.norm.weight                            <-> output_norm.weight
//   lm_head.weight                               <-> output.weight
//   model.layers.N.input_layernorm.weight        <-> blk.N.attn_norm.weight
//   model.layers.N.self_attn.{q,k,v,o}_proj.weight <-> blk.N.attn_{q,k,v,output}.weight
//   model.layers.N.post_attention_layernorm.weight <-> blk.N.ffn_norm.weight
//   model.layers.N.mlp.{gate,up,down}_proj.weight  <-> blk.N.ffn_{gate,up,down}.weight
#ifndef LOOM_MODELS_WEIGHTS_HF_TENSOR_NAMES_H_
#define LOOM_MODELS_WEIGHTS_HF_TENSOR_NAMES_H_

#include <optional>
#include <string>

namespace loom {

// nullopt for names outside the table (e.g. rotary_emb.inv_freq).
std::optional<std::string> HfToGgufName(const std::string& hf);
std::optional<std::string> GgufToHfName(const std::string& gguf);

}  // namespace loom

#endif  // LOOM_MODELS_WEIGHTS_HF_TENSOR_NAMES_H_
