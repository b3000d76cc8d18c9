"""Writes src/test/resources/chat/expected.jsonl: token ids and assistant masks that Hugging Face transformers
computes for the conversations of src/test/resources/chat/conversations.jsonl (dev tool; tests never run Python).

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install transformers tokenizers jinja2
    /tmp/venv/bin/python tools/chat-fixtures/make_chat_fixtures.py

For each (tokenizer, template, conversation): transformers' apply_chat_template(tokenize=True, return_dict=True,
return_assistant_tokens_mask=True). Templates with {% generation %} blocks are used as they are. A template without
them (Qwen3's, Llama 3's, Mistral's) gets no mask from transformers, so the mask comes from a copy of it, written
here by hand, with {% generation %} around what fsdp4j trains: each assistant message's content as rendered, its
tool calls, and the end-of-turn token that closes it (<|im_end|>, <|eot_id|>, </s>); the generator checks that the
copy renders the same text as the original. A conversation the template refuses is written with its error.
"""
import gzip
import json
import os
import shutil
import tempfile

from transformers import AutoTokenizer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "src", "test", "resources")
CHAT = os.path.join(ROOT, "chat")

QWEN3_ANNOTATED = None  # built from the original below


def qwen3_annotated(original):
    head, rest = original.split('{%- elif message.role == "assistant" %}', 1)
    _, tail = rest.split('{%- elif message.role == "tool" %}', 1)
    assistant = '''{%- elif message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or (not loop.last and reasoning_content)) %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' }}
            {%- set content = content.lstrip('\\n') %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' }}
        {%- endif %}
        {%- generation %}
        {{- content }}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\\n' }}
    '''
    return head + assistant + '{%- elif message.role == "tool" %}' + tail


def llama3_annotated(original):
    assert original.startswith("{% set loop_messages = messages %}{% for message in loop_messages %}")
    return ("{% set loop_messages = messages %}{% for message in loop_messages %}"
            "{% if message['role'] == 'assistant' %}"
            "{% set header = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' %}"
            "{% if loop.index0 == 0 %}{% set header = bos_token + header %}{% endif %}{{ header }}"
            "{% generation %}{{ message['content'] | trim + '<|eot_id|>' }}{% endgeneration %}"
            "{% else %}"
            "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
            "+ message['content'] | trim + '<|eot_id|>' %}"
            "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
            "{% endif %}{% endfor %}"
            "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}")


def mistral_annotated(original):
    old = "{{ message['content'] + eos_token}}"
    assert old in original
    return original.replace(old, "{% generation %}" + old + "{% endgeneration %}")


def tokenizer_dir(name):
    src = os.path.join(ROOT, "tokenizer", name)
    d = tempfile.mkdtemp(prefix="chat-fixtures-" + name)
    with gzip.open(os.path.join(src, "tokenizer.json.gz")) as f, open(os.path.join(d, "tokenizer.json"), "wb") as o:
        shutil.copyfileobj(f, o)
    shutil.copy(os.path.join(src, "tokenizer_config.json"), d)
    return d


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main():
    conversations = [json.loads(line) for line in open(os.path.join(CHAT, "conversations.jsonl"), encoding="utf-8")]
    cases = []  # (tokenizer, template key, template source, annotated source or None)
    qwen = AutoTokenizer.from_pretrained(tokenizer_dir("qwen3"))
    llama = AutoTokenizer.from_pretrained(tokenizer_dir("llama3"))
    mistral = AutoTokenizer.from_pretrained(tokenizer_dir("llama2"))
    cases.append(("qwen3", qwen, "tokenizer", qwen.chat_template, qwen3_annotated(qwen.chat_template)))
    cases.append(("llama3", llama, "tokenizer", llama.chat_template, llama3_annotated(llama.chat_template)))
    mistral_template = read(os.path.join(CHAT, "mistral.jinja"))
    cases.append(("llama2", mistral, "mistral.jinja", mistral_template, mistral_annotated(mistral_template)))
    generation = read(os.path.join(CHAT, "chatml-generation.jinja"))
    cases.append(("qwen3", qwen, "chatml-generation.jinja", generation, generation))
    out = []
    for name, tok, key, template, annotated in cases:
        for index, record in enumerate(conversations):
            messages = record["messages"]
            tools = record.get("tools")
            row = {"tokenizer": name, "template": key, "line": index + 1}
            try:
                text = tok.apply_chat_template(messages, tools=tools, chat_template=template, tokenize=False)
            except Exception as e:  # the template refuses it (raise_exception)
                row["error"] = str(e)
                out.append(row)
                continue
            result = tok.apply_chat_template(messages, tools=tools, chat_template=annotated, tokenize=True,
                                             return_dict=True, return_assistant_tokens_mask=True)
            again = tok.apply_chat_template(messages, tools=tools, chat_template=annotated, tokenize=False)
            assert again == text, (name, key, index, again, text)
            ids = tok(text, add_special_tokens=False)["input_ids"]
            assert list(result["input_ids"]) == ids
            row["input_ids"] = ids
            row["assistant_masks"] = list(result["assistant_masks"])
            assert sum(row["assistant_masks"]) > 0, row
            out.append(row)
    with open(os.path.join(CHAT, "expected.jsonl"), "w", encoding="utf-8") as f:
        for row in out:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(len(out), "rows")


if __name__ == "__main__":
    main()
