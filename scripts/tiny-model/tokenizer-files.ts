import type { TrainedBpe } from "./bpe-train";

export const EOS_TOKEN = "<|endoftext|>";

// A minimal ChatML-like template; roles are plain text, the turn separator is EOS.
const CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + message['content'] + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

/**
 * tokenizer.json in the HF `tokenizers` format (byte-level BPE like GPT-2). Ids between the
 * trained vocabulary and EOS (a large model's vocabulary) are filler tokens `<xN>` that no text
 * encodes to but that decode to themselves.
 */
export function tokenizerJson(bpe: TrainedBpe, eosId: number) {
  const filler = Array.from({ length: eosId - bpe.vocab.size }, (_, i) => [`<x${i}>`, bpe.vocab.size + i] as const);
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: eosId,
        content: EOS_TOKEN,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: true,
        special: true,
      },
    ],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: { ...byteLevel, trim_offsets: false },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      vocab: Object.fromEntries([...bpe.vocab.entries(), ...filler, [EOS_TOKEN, eosId]]),
      merges: bpe.merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}

export function tokenizerConfigJson(maxLength: number) {
  return {
    tokenizer_class: "GPT2Tokenizer",
    add_bos_token: false,
    add_prefix_space: false,
    bos_token: EOS_TOKEN,
    eos_token: EOS_TOKEN,
    unk_token: EOS_TOKEN,
    model_max_length: maxLength,
    clean_up_tokenization_spaces: false,
    chat_template: CHAT_TEMPLATE,
  };
}
