"""A tiny, randomly initialised LLaVA-style vision-language model, built offline.

`build_tiny_vlm(path)` writes a complete model directory (config, weights, tokenizer,
processor, chat template) that `AutoProcessor` + `AutoModelForImageTextToText` load back,
so tests exercise the hf adapter's real loading, chat-template, batching and decoding
path on a CPU in seconds without downloading anything. Its answers are noise.

Sizes: a 2-layer Llama text model (hidden 32, 2 heads) and a 2-layer CLIP vision tower
(hidden 32, 32x32 images in 8x8 patches = 16 image tokens), and a byte-level BPE
tokenizer trained on a few prompt strings.

For vLLM's CPU build (models/vllm_engine.py), whose attention takes heads of 64:
`build_tiny_blip2` (the multimodal model it can load: its docstring says why not LLaVA)
and `build_tiny_lm` (text only), both with the same tokenizer and chat template.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# The tokenizer's training text: the words our prompts use, so that prompts tokenize
# into a few hundred merges instead of raw bytes.
_CORPUS = [
    "Question: Which imaging modality was used to acquire this image?",
    "Options:\nA. CT\nB. MRI\nC. X-Ray\nD. US",
    "Answer with the option's letter from the given choices directly.",
    "What is the most likely diagnosis? Normal Pneumonia Effusion Cardiomegaly",
    "Which organ is shown? Brain Chest Heart Lungs Breast liver kidney",
    "The answer is A. The answer is B. ANSWER: C. ANSWER: D.",
    "USER: ASSISTANT: user assistant system",
]

IMAGE_TOKEN = "<image>"
# A minimal LLaVA-style template: text parts verbatim, each image part as one <image>
# placeholder (the processor expands it to image_seq_length tokens).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] | upper }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>\n{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)

# BLIP-2's: the image parts leave no mark in the text (its processor, and vLLM, put the
# image's query tokens before the prompt themselves).
CHAT_TEMPLATE_NO_IMAGE_MARK = CHAT_TEMPLATE.replace("{% if part['type'] == 'image' %}<image>\n{% elif", "{% if")

IMAGE_SIZE = 32
PATCH_SIZE = 8
IMAGE_SEQ_LENGTH = (IMAGE_SIZE // PATCH_SIZE) ** 2
TEXT_HIDDEN_ENGINE = 128  # the models vLLM serves in tests: heads of 64


def _tokenizer(*, names_image_token: bool = True) -> Any:
    """The byte-level BPE tokenizer trained on `_CORPUS`, with the chat template.
    `names_image_token`: the tokenizer says which token is the image's (LLaVA's processor
    reads it there; BLIP-2's makes its own and fails on a tokenizer that names one)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<unk>", "<s>", "</s>", "<pad>", IMAGE_TOKEN]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        extra_special_tokens={"image_token": IMAGE_TOKEN} if names_image_token else {},
        padding_side="left",  # batched generation appends on the right
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _text_config(tokenizer: Any, hidden: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_lm(path: str | os.PathLike[str], *, seed: int = 0, hidden: int = TEXT_HIDDEN_ENGINE) -> Path:
    """A text-only tiny Llama with the same tokenizer and chat template (images are not
    shown to it): what an engine that cannot load the multimodal model serves. `hidden`
    128 gives heads of 64, a size every attention backend of vLLM's CPU build takes."""
    import torch
    from transformers import LlamaForCausalLM

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_text_config(tokenizer, hidden)).eval()
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_tiny_vlm(path: str | os.PathLike[str], *, seed: int = 0, hidden: int = 32) -> Path:
    """Build and save the tiny model under `path` (created if needed); returns the path.

    Deterministic for a given seed. Imports torch, transformers and tokenizers (the
    `medrcube[hf]` extra). `hidden` is the text model's hidden size (2 heads of half of it).
    """
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    try:  # transformers >= 5 names the Pillow backend explicitly; older ones have one class
        from transformers import CLIPImageProcessorPil as ImageProcessor
    except ImportError:  # pragma: no cover - depends on the installed transformers
        # (mypy checks the newer branch; the older class is a different type of the same use)
        from transformers import CLIPImageProcessor as ImageProcessor  # type: ignore[assignment]

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)

    tokenizer = _tokenizer()
    text_config = _text_config(tokenizer, hidden)
    vision_config = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=32,
    )
    image_token_index = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    assert isinstance(image_token_index, int)  # one token in, one id out
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=image_token_index,
        # CLIP prepends a CLS token (17 features); "default" drops it, leaving the 16
        # patch features that the 16 <image> tokens stand for.
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
        image_seq_length=IMAGE_SEQ_LENGTH,
    )
    # Not a keyword of LlavaConfig's declared signature (a PreTrainedConfig attribute): set
    # after construction, which writes the same config.json.
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(out)

    image_processor = ImageProcessor(
        size={"shortest_edge": IMAGE_SIZE},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # the CLS token, which "default" removes again
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
    )
    processor.save_pretrained(out)
    return out


QUERY_TOKENS = 8  # BLIP-2's learned queries: the image tokens the language model reads


def build_tiny_blip2(path: str | os.PathLike[str], *, seed: int = 0, query_tokens: int = QUERY_TOKENS) -> Path:
    """A tiny BLIP-2 (BLIP vision tower, Q-Former, OPT language model) with the same
    tokenizer and chat template: the multimodal model vLLM's CPU build serves.

    Not the LLaVA model above: vLLM 0.32 finds the vision tower of LLaVA (CLIP), PaliGemma
    (SigLIP) and the other CLIP/SigLIP models through a function that imports its Pixtral
    module, which imports transformers' Pixtral image processor, which imports torchvision
    at module level; the only torchvision for torch 2.13 on the package index is a CUDA
    build that does not import beside the CPU torch. BLIP-2 takes neither path. vLLM puts
    the image's query tokens before the prompt itself (image first); `query_tokens` is
    how many (benchmarks/engines.py makes the image long enough to fill cache blocks).
    """
    import torch
    from transformers import (
        Blip2Config,
        Blip2ForConditionalGeneration,
        Blip2Processor,
        Blip2QFormerConfig,
        Blip2VisionConfig,
        OPTConfig,
    )

    try:  # transformers >= 5 names the Pillow backend explicitly
        from transformers import BlipImageProcessorPil as ImageProcessor
    except ImportError:  # pragma: no cover - depends on the installed transformers
        from transformers import BlipImageProcessor as ImageProcessor  # type: ignore[assignment]

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(names_image_token=False)
    tokenizer.chat_template = CHAT_TEMPLATE_NO_IMAGE_MARK
    text = OPTConfig(vocab_size=len(tokenizer), hidden_size=TEXT_HIDDEN_ENGINE, ffn_dim=2 * TEXT_HIDDEN_ENGINE,
                     num_hidden_layers=2, num_attention_heads=2, word_embed_proj_dim=TEXT_HIDDEN_ENGINE,
                     max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                     eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    vision = Blip2VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                               image_size=IMAGE_SIZE, patch_size=PATCH_SIZE)
    qformer = Blip2QFormerConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 encoder_hidden_size=32)
    config = Blip2Config(vision_config=vision.to_dict(), qformer_config=qformer.to_dict(), text_config=text.to_dict(),
                         num_query_tokens=query_tokens, image_token_index=tokenizer.convert_tokens_to_ids(IMAGE_TOKEN))
    torch.manual_seed(seed)
    model = Blip2ForConditionalGeneration(config).eval()
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        setattr(model.generation_config, key, getattr(tokenizer, key))
    model.save_pretrained(out)
    processor = Blip2Processor(image_processor=ImageProcessor(size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}),
                               tokenizer=tokenizer, num_query_tokens=query_tokens,
                               chat_template=CHAT_TEMPLATE_NO_IMAGE_MARK)
    processor.save_pretrained(out)
    return out
