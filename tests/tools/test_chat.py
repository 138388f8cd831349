"""Chat templates (tools/colibri_tools/runtime/chat.py) render and tokenize exactly as
transformers' apply_chat_template does, for templates that use what real
checkpoints use (special tokens, raise_exception, namespace, tojson with
tools, loop controls, generation blocks)."""

from __future__ import annotations

import json

import pytest
from colibri_tools.runtime.chat import (
    CHAT_TEMPLATE_FILE,
    TOKENIZER_CONFIG,
    ChatTemplate,
    ChatTemplateError,
    special_tokens,
)

transformers = pytest.importorskip("transformers")

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

LLAMA2 = """{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}\
{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}\
{% set system_message = false %}{% endif %}{% for message in loop_messages %}\
{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\
{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\
{% endif %}{% if loop.index0 == 0 and system_message != false %}\
{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}\
{% else %}{% set content = message['content'] %}{% endif %}\
{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}\
{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}\
{% endif %}{% endfor %}"""

TOOLS = """{%- set ns = namespace(system=none, n=0) -%}
{%- for m in messages -%}
  {%- if m.role == 'system' -%}{%- set ns.system = m.content -%}{%- continue -%}{%- endif -%}
  {%- set ns.n = ns.n + 1 -%}
{%- endfor -%}
{%- if tools %}<tools>{{ tools | tojson(indent=2) }}</tools>
{% endif -%}
{%- if ns.system %}[system] {{ ns.system }}
{% endif -%}
{%- for m in messages if m.role != 'system' -%}
  {%- if loop.index > 8 %}{% break %}{% endif -%}
  {%- if m.role == 'assistant' %}{% generation %}[a] {{ m.content }}{% endgeneration %}
{% else %}[{{ m.role }}] {{ m.content | tojson }}
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt %}[a] {% endif -%}
{{- dict(turns=ns.n) | tojson -}}"""

MESSAGES = [
    {"role": "system", "content": "Be brief & <b>kind</b>."},
    {"role": "user", "content": "Caf\u00e9? \U0001F600 \"quoted\""},
    {"role": "assistant", "content": "  Yes, caf\u00e9.  "},
    {"role": "user", "content": "And tea?"},
]
TOOL_SCHEMAS = [{"type": "function", "function": {"name": "weather", "description": "\u00b0C <now>",
                                                    "parameters": {"type": "object"}}}]


@pytest.fixture(scope="module")
def hf_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=[
        "<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([json.dumps(MESSAGES) + " [INST] <<SYS>> tools weather"] * 3,
                            trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>",
                                                eos_token="</s>", unk_token="<unk>")
    return fast, tok


@pytest.mark.parametrize("source", [CHATML, LLAMA2, TOOLS], ids=["chatml", "llama2", "tools"])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_render_and_ids_equal_transformers(hf_tokenizer, source, add_generation_prompt):
    fast, tok = hf_tokenizer
    messages = MESSAGES if source is not LLAMA2 else MESSAGES  # system first, then alternating
    tools = TOOL_SCHEMAS if source is TOOLS else None
    want = fast.apply_chat_template(messages, chat_template=source, tokenize=False,
                                    add_generation_prompt=add_generation_prompt, tools=tools)
    want_ids = fast.apply_chat_template(messages, chat_template=source, tokenize=True,
                                        add_generation_prompt=add_generation_prompt, tools=tools,
                                        return_dict=False)
    ours = ChatTemplate(source, {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    text = ours.render(messages, add_generation_prompt=add_generation_prompt, tools=tools)
    assert text == want
    assert tok.encode(text, add_special_tokens=False).ids == list(want_ids)


def test_raise_exception_becomes_a_clear_error():
    ours = ChatTemplate(LLAMA2, {"bos_token": "<s>", "eos_token": "</s>"})
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        ours.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_sandbox_and_bad_templates():
    with pytest.raises(ChatTemplateError, match="does not compile"):
        ChatTemplate("{% for m in messages %}")
    escape = ChatTemplate("{{ messages.__class__.__mro__ }}")
    with pytest.raises(ChatTemplateError):
        escape.render([{"role": "user", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="underscore"):
        ChatTemplate("{% set ns = namespace(_x=1) %}").render([])
    with pytest.raises(ChatTemplateError, match="must be a dict"):
        ChatTemplate(CHATML).render(["not a message"])


def test_template_sources_in_a_model_dir(tmp_path):
    assert ChatTemplate.from_model_dir(tmp_path) is None
    config = {"chat_template": [{"name": "tool_use", "template": "T"},
                                {"name": "default", "template": "D{{ bos_token }}"}],
              "bos_token": {"content": "<s>", "special": True}, "eos_token": "</s>"}
    (tmp_path / TOKENIZER_CONFIG).write_text(json.dumps(config))
    assert special_tokens(config) == {"bos_token": "<s>", "eos_token": "</s>"}
    assert ChatTemplate.from_model_dir(tmp_path).render([]) == "D<s>"
    (tmp_path / CHAT_TEMPLATE_FILE).write_text("J{{ eos_token }}")  # the .jinja file wins
    assert ChatTemplate.from_model_dir(tmp_path).render([]) == "J</s>"
    (tmp_path / TOKENIZER_CONFIG).write_text("[1, 2]")
    with pytest.raises(ChatTemplateError, match="not a JSON object"):
        ChatTemplate.from_model_dir(tmp_path)
