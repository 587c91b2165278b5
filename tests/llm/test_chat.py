"""Chat templates in jinja2's sandbox. Templates and expected prompts are facts from llama.cpp's
tests/test-chat-template.cpp and from the models' published templates."""
import pytest

from pyggml.llm.chat import ChatTemplate, apply_chat_template

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant"},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there"},
    {"role": "user", "content": "Who are you"},
    {"role": "assistant", "content": "   I am an assistant   "},
    {"role": "user", "content": "Another question"},
]

CHATML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
CHATML_EXPECTED = '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n'

MISTRAL_V02 = "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"

DEEPSEEK_CODER = "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% endif %}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- if message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif -%}\n{%- endfor -%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you only answer questions related to computer science. For politically sensitive questions, security and privacy issues, and other non-computer science questions, you will refuse to answer\\n'}}\n{%- endif %}\n{%- for message in messages %}\n    {%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    {%- else %}\n        {%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}"
DEEPSEEK_CODER_EXPECTED = 'You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n'

COMMAND_R_PLUS = "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif false == true %}{% set loop_messages = messages %}{% set system_message = 'You are Command-R, a brilliant, sophisticated, AI-assistant trained to assist human users by providing thorough responses. You are trained by Cohere.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% set content = message['content'] %}{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}"
COMMAND_R_PLUS_EXPECTED = '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'

LLAMA3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
LLAMA3_EXPECTED = '<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'

GEMMA2 = ("{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
          "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
          "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
          "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
          "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")

SMOLLM2 = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
           "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
           "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
           "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


@pytest.mark.parametrize("template,expected,bos,eos", [
    (CHATML, CHATML_EXPECTED, "", ""),
    (DEEPSEEK_CODER, DEEPSEEK_CODER_EXPECTED, "", ""),
    (COMMAND_R_PLUS, COMMAND_R_PLUS_EXPECTED, "", ""),
    (LLAMA3, LLAMA3_EXPECTED, "", ""),
], ids=["chatml", "deepseek-coder", "command-r-plus", "llama-3"])
def test_llama_cpp_template_cases(template, expected, bos, eos):
    got = ChatTemplate(template, bos_token=bos, eos_token=eos).render(CONVERSATION, add_generation_prompt=True)
    assert got == expected


def test_llama3_puts_bos_first():
    got = ChatTemplate(LLAMA3, bos_token="<|begin_of_text|>").render(CONVERSATION[:2])
    assert got == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant"
                   "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n")


def test_chatml_without_generation_prompt_ends_at_the_last_turn():
    got = ChatTemplate(CHATML).render(CONVERSATION[1:2], add_generation_prompt=False)
    assert got == "<|im_start|>user\nHello<|im_end|>\n"


def test_gemma2_refuses_a_system_turn_and_trims_content():
    t = ChatTemplate(GEMMA2, bos_token="<bos>", eos_token="<eos>")
    with pytest.raises(ValueError, match="System role not supported"):
        t.render(CONVERSATION, add_generation_prompt=True)
    got = t.render(CONVERSATION[1:], add_generation_prompt=True)
    assert got == ("<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n"
                   "<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n"
                   "<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n")
    with pytest.raises(ValueError, match="roles must alternate"):
        t.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])


def test_smollm2_adds_its_default_system_prompt():
    t = ChatTemplate(SMOLLM2)
    got = t.render([{"role": "user", "content": "What is 2+2?"}], add_generation_prompt=True)
    assert got == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                   "<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    got = t.render(CONVERSATION[:2])
    assert got.startswith("<|im_start|>system\nYou are a helpful assistant<|im_end|>\n") and "SmolLM" not in got


def test_raise_exception_becomes_a_value_error():
    with pytest.raises(ValueError, match="refused the conversation: Conversation roles must alternate"):
        ChatTemplate(MISTRAL_V02, eos_token="</s>").render(CONVERSATION)
    ok = ChatTemplate(MISTRAL_V02, eos_token="</s>").render(CONVERSATION[1:3])
    assert ok == "[INST] Hello [/INST]Hi there</s>"


def test_tojson_and_strftime_now_and_extra_variables():
    t = ChatTemplate("{{ tools | tojson }}|{{ x | tojson(indent=2) }}|{{ strftime_now('%Y') | length }}|{{ date_string }}")
    got = t.render([], tools=[{"name": "f<é>"}], x={"a": 1}, date_string="26 Jul 2024")
    assert got == '[{"name": "f<é>"}]|{\n  "a": 1\n}|4|26 Jul 2024'


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ raise_exception.__globals__ }}",
    "{% set _ = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages | length }}",
    "{{ messages[0].update({'role': 'x'}) }}",
])
def test_sandbox_refuses_escapes_and_mutation(source):
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="tried to leave the sandbox"):
        ChatTemplate(source).render(messages)
    assert messages == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("source,what", [
    ("{{ 'a' * 100000000 }}", "refused"),
    ("{% for i in range(10**9) %}x{% endfor %}", "failed|refused"),
    ("{{ 10 ** 100000 }}", "refused"),
])
def test_runaway_templates_are_stopped(source, what):
    with pytest.raises(ValueError, match=what):
        ChatTemplate(source).render([])


def test_bad_templates_and_messages_raise_clear_errors():
    with pytest.raises(ValueError, match="syntax error at line 1"):
        ChatTemplate("{% for m in messages %}{{ m }")
    with pytest.raises(ValueError, match="empty"):
        ChatTemplate("  ")
    with pytest.raises(ValueError, match="failed: .*ZeroDivisionError"):
        ChatTemplate("{{ 1 / 0 }}").render([])
    with pytest.raises(ValueError, match="message 0"):
        ChatTemplate(CHATML).render([{"content": "no role"}])


def test_template_from_a_vocabulary():
    from vocab_files import vocab_path
    from pyggml.llm.vocab import Vocab
    v = Vocab.load(vocab_path("qwen2"))
    assert v.chat_template and "<|im_start|>" in v.chat_template
    prompt = apply_chat_template(v, [{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    ids = v.tokenize(prompt, add_special=False, parse_special=True)
    assert ids.count(v.token_to_id["<|im_start|>"]) == prompt.count("<|im_start|>")
    nov = Vocab.load(vocab_path("gpt-2"))
    with pytest.raises(ValueError, match="no chat template"):
        ChatTemplate.from_vocab(nov)


def test_generation_blocks_render_their_body():
    src = ("{% for m in messages %}{% if m['role'] == 'assistant' %}{% generation %}A: {{ m['content'] }}"
           "{% endgeneration %}{% else %}U: {{ m['content'] }}{% endif %}{{ '\\n' }}{% endfor %}")
    got = ChatTemplate(src).render(CONVERSATION[1:3])
    assert got == "U: Hello\nA: Hi there\n"
