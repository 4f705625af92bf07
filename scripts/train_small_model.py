#!/usr/bin/env python3
"""Train tessera-kjv, the small model that ships in models/tessera-kjv.

Corpus: the King James Version (public domain) from Debian's bible-kjv package,
printed one verse per line ("Ge1:1 In the beginning God created ..."):

    apt-get install -y bible-kjv
    bible -f "Genesis 1:1-Revelation 22:21" > kjv.txt     # 31,102 lines, 4,404,412 bytes

The text is generated, never committed. The GPU machine that trains the model
has no package manager access, so kjv.txt is made on a Debian machine and
copied next to this script; only Python 3, torch, transformers, tokenizers and
matplotlib are needed there. Run (about a minute of training on one H200):

    python3 scripts/train_small_model.py --corpus kjv.txt --out models/tessera-kjv \
        --fixtures tests/fixtures/tessera-kjv --docs docs

What it does, all seeded by --seed:
  1. Splits the 1,189 chapters by index: index % 100 == 50 is the held-out set
     (12 chapters, written to FIXTURES/heldout.txt for perplexity), index % 100
     == 25 the validation set (12 chapters), the rest (1,165) is training text.
  2. Builds training documents: each chapter as plain text ("Genesis 1:1 ..."
     lines between <|bos|> and <|eos|>) and conversations in the model's own
     chat template (the user asks for a reference, gives a verse to continue or
     a verse to locate; the assistant answers with verses or a reference).
  3. Trains a byte-level BPE tokenizer (4,096 ids, 6 special tokens).
  4. Trains a Llama model (2.2 M parameters) in bf16 autocast with f32 weights,
     once per candidate schedule length (--steps), and keeps the run with the
     lowest validation loss: the corpus is small enough to overfit.
  5. Saves a Hugging Face checkpoint in float32, reloads it with transformers
     and writes the held-out perplexity, reference generations for the
     engine's tests, the loss curve and a run log.

Held-out perplexity is the standard sliding-window one: the held-out file is
tokenized without special tokens (no BOS); window k covers tokens
[k*stride, min(k*stride + context, n)); it scores the tokens from the previous
window's end (the first window: from token 1) to its own end, so tokens
1..n-1 are each scored once with as much left context as the window gives;
ppl = exp(total negative log-likelihood / (n - 1)).
"""
import argparse
import hashlib
import json
import math
import os
import random
import re
import time

BOOKS = [
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
    "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
    "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
    "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians",
    "2 Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians", "1 Thessalonians",
    "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon", "Hebrews", "James",
    "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude", "Revelation",
]

PAD, BOS, EOS = "<|pad|>", "<|bos|>", "<|eos|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, "<|system|>", "<|user|>", "<|assistant|>"]
ROLES = ("system", "user", "assistant")

# Each turn is "<|role|>\n" + content + "<|eos|>\n"; the conversation starts with BOS.
CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- if message['role'] not in ['system', 'user', 'assistant'] -%}"
    "{{- raise_exception('tessera-kjv knows only the roles system, user and assistant') -}}"
    "{%- endif -%}"
    "{{- '<|' + message['role'] + '|>\\n' + message['content'] + '<|eos|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant|>\\n' -}}{%- endif -%}"
)

SYSTEM_PROMPTS = [
    "You are a reader of the King James Bible.",
    "Answer with verses from the King James Version of the Bible.",
    "You know the whole King James Bible by heart.",
]

# Chapter index % 100: 50 is the held-out set (perplexity), 25 the validation set (picks the step count).
SPLIT_EVERY, HELDOUT_PHASE, VALID_PHASE = 100, 50, 25


def render_chat(messages, add_generation_prompt=False):
    """Python twin of CHAT_TEMPLATE, used to build training text."""
    text = BOS
    for m in messages:
        assert m["role"] in ROLES
        text += f"<|{m['role']}|>\n{m['content']}{EOS}\n"
    if add_generation_prompt:
        text += "<|assistant|>\n"
    return text


def read_corpus(path):
    """Returns chapters as (book name, chapter number, [(verse number, text)])."""
    line_re = re.compile(r"^([1-3]?[A-Za-z]+)(\d+):(\d+) (.+)$")
    abbrevs, chapters = [], []
    with open(path, encoding="ascii") as f:
        for lineno, line in enumerate(f, 1):
            m = line_re.match(line.rstrip("\n"))
            if not m:
                raise SystemExit(f"{path}:{lineno}: not a 'Book C:V text' line: {line[:60]!r}")
            abbrev, ch, verse, text = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
            if not abbrevs or abbrevs[-1] != abbrev:
                abbrevs.append(abbrev)
            book = BOOKS[len(abbrevs) - 1] if len(abbrevs) <= len(BOOKS) else None
            if not chapters or chapters[-1][0] != book or chapters[-1][1] != ch:
                chapters.append((book, ch, []))
            chapters[-1][2].append((verse, text))
    if len(abbrevs) != len(BOOKS):
        raise SystemExit(f"{path}: expected {len(BOOKS)} books, found {len(abbrevs)}")
    return chapters


def verse_line(book, ch, verse, text):
    return f"{book} {ch}:{verse} {text}"


def chapter_text(chapter):
    book, ch, verses = chapter
    return "".join(verse_line(book, ch, v, t) + "\n" for v, t in verses)


def chat_exchange(rng, chapter):
    """One user question about `chapter` and the assistant's answer."""
    book, ch, verses = chapter
    kind = rng.choice(["read", "read", "continue", "locate"])
    if kind == "continue" and len(verses) < 2:
        kind = "read"
    if kind == "read":
        i = rng.randrange(len(verses))
        j = min(len(verses) - 1, i + rng.choice([0, 0, 1, 2, 3]))
        ref = f"{book} {ch}:{verses[i][0]}" + (f"-{verses[j][0]}" if j > i else "")
        ask = rng.choice(["Read {}.", "Recite {}.", "What does {} say?", "{}"]).format(ref)
        answer = "\n".join(verse_line(book, ch, v, t) for v, t in verses[i:j + 1])
    elif kind == "continue":
        i = rng.randrange(len(verses) - 1)
        j = min(len(verses) - 1, i + rng.choice([1, 1, 2, 3]))
        ask = rng.choice(["What comes after this verse?\n{}", "Continue:\n{}"]).format(verses[i][1])
        answer = "\n".join(verse_line(book, ch, v, t) for v, t in verses[i + 1:j + 1])
    else:
        v, t = rng.choice(verses)
        ask = rng.choice(["Where is this written?\n{}", "Which verse says this?\n{}"]).format(t)
        answer = f"{book} {ch}:{v}"
    return [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]


def chat_conversations(rng, chapters, rounds):
    convs = []
    for _ in range(rounds):
        for chapter in chapters:
            for _ in range(max(1, len(chapter[2]) // 8)):
                messages = []
                if rng.random() < 0.5:
                    messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
                turns = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
                for t in range(turns):
                    messages += chat_exchange(rng, chapter if t == 0 else rng.choice(chapters))
                convs.append(messages)
    return convs


def train_tokenizer(texts, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    for i, s in enumerate(SPECIAL_TOKENS):
        assert tok.token_to_id(s) == i, (s, tok.token_to_id(s))
    # Plain-text encoding starts with BOS, like the training documents.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, SPECIAL_TOKENS.index(BOS))])
    return tok


def wrap_tokenizer(tok):
    try:
        from transformers import PreTrainedTokenizerFast as Fast
    except ImportError:
        from transformers import TokenizersBackend as Fast
    hf = Fast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD, model_max_length=1024,
              clean_up_tokenization_spaces=False)
    hf.chat_template = CHAT_TEMPLATE
    return hf


def check_tokenizer(hf, raw, samples):
    """The transformers tokenizer must agree with the raw one and with render_chat."""
    for text in samples["texts"]:
        got = list(hf(text)["input_ids"])
        assert got == raw.encode(text).ids, ("encode", text, got[:8])
        assert hf.decode(raw.encode(text, add_special_tokens=False).ids) == text, ("decode", text)
    for messages in samples["chats"]:
        for gen in (False, True):
            rendered = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            assert rendered == render_chat(messages, gen), ("chat template", rendered[:200])


def sliding_window_nll(model, ids, context, stride, device):
    """Sum of NLL over tokens 1..n-1 by the sliding-window method (see module doc)."""
    import torch
    assert 0 < stride <= context
    ids_t = torch.tensor(ids, dtype=torch.long, device=device)
    n, total, scored, windows, prev_end, begin = len(ids), 0.0, 0, 0, 0, 0
    with torch.no_grad():
        while True:
            end = min(begin + context, n)
            logits = model(input_ids=ids_t[begin:end][None], use_cache=False).logits[0]
            logp = torch.log_softmax(logits.double(), dim=-1)
            first = max(prev_end, begin + 1)  # first token this window scores
            rows = logp[first - 1 - begin:end - 1 - begin]
            total -= rows.gather(1, ids_t[first:end, None]).sum().item()
            scored += end - first
            windows += 1
            prev_end = end
            if end == n:
                break
            begin += stride
    assert scored == n - 1
    return {"context": context, "stride": stride, "tokens": n, "scored_tokens": scored,
            "windows": windows, "mean_nll": total / scored, "perplexity": math.exp(total / scored)}


def greedy_reference(model, prompt_ids, max_new, eos_id):
    """Greedy decoding by full forward passes; top-5 log-probs at each step."""
    import torch
    ids, out, top_ids, top_lps, margins = list(prompt_ids), [], [], [], []
    with torch.no_grad():
        for _ in range(max_new):
            logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1]
            lp = torch.log_softmax(logits.double(), dim=-1)
            top = torch.topk(lp, 5)
            nxt = int(top.indices[0])
            top_ids.append([int(i) for i in top.indices])
            top_lps.append([round(float(v), 6) for v in top.values])
            margins.append(float(top.values[0] - top.values[1]))
            ids.append(nxt)
            out.append(nxt)
            if nxt == eos_id:
                break
    return out, top_ids, top_lps, min(margins)


def plot_loss(path, run, runs, title):
    """Left: the chosen run's losses. Right: final losses of every candidate length."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ema, smooth = None, []
    for v in run["train_loss"]:
        ema = v if ema is None else 0.95 * ema + 0.05 * v
        smooth.append(ema)
    steps = list(range(1, len(smooth) + 1))
    curve = run["curve"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100, gridspec_kw={"width_ratios": [2, 1]})
    ax.plot(steps, run["train_loss"], color="tab:blue", alpha=0.25, linewidth=0.6)
    ax.plot(steps, smooth, color="tab:blue", label="train (EMA 0.95)")
    ax.plot(curve["step"], curve["validation"], "o-", color="tab:green", markersize=3, label="validation")
    ax.plot(curve["step"], curve["heldout"], "o-", color="tab:orange", markersize=3, label="held-out")
    ax.set_ylim(bottom=max(0.0, min(smooth + curve["heldout"]) - 0.3), top=min(9.0, max(run["train_loss"])))
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats/token)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    ax2.plot([r["steps"] for r in runs], [r["validation"] for r in runs], "o-", color="tab:green", label="validation")
    ax2.plot([r["steps"] for r in runs], [r["curve"]["heldout"][-1] for r in runs], "o-", color="tab:orange",
             label="held-out")
    ax2.axvline(run["steps"], color="gray", linestyle="--", linewidth=0.8)
    ax2.set_xlabel("schedule length (steps)")
    ax2.set_title("final loss per candidate run", fontsize=10)
    ax2.grid(alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="output of bible -f 'Genesis 1:1-Revelation 22:21'")
    ap.add_argument("--out", required=True, help="checkpoint directory to write")
    ap.add_argument("--fixtures", required=True, help="directory for heldout.txt and reference JSON")
    ap.add_argument("--docs", required=True, help="directory for the loss curve and run log")
    ap.add_argument("--steps", default="300,450,600,800,1100",
                    help="candidate step counts (comma-separated); the best on validation is kept")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--chat-rounds", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import tokenizers
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__}
    print("versions", versions, flush=True)
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    device = "cuda"
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    for d in (args.out, args.fixtures, args.docs):
        os.makedirs(d, exist_ok=True)

    # --- data ---------------------------------------------------------------------------
    with open(args.corpus, "rb") as f:
        corpus_sha = hashlib.sha256(f.read()).hexdigest()
    chapters = read_corpus(args.corpus)
    held = [c for i, c in enumerate(chapters) if i % SPLIT_EVERY == HELDOUT_PHASE]
    valid = [c for i, c in enumerate(chapters) if i % SPLIT_EVERY == VALID_PHASE]
    train = [c for i, c in enumerate(chapters) if i % SPLIT_EVERY not in (HELDOUT_PHASE, VALID_PHASE)]
    heldout_text = "".join(chapter_text(c) for c in held)
    heldout_path = os.path.join(args.fixtures, "heldout.txt")
    with open(heldout_path, "w", encoding="ascii") as f:
        f.write(heldout_text)
    print(f"corpus: {len(chapters)} chapters; held out {len(held)} "
          f"({', '.join(f'{b} {c}' for b, c, _ in held)}), {len(heldout_text)} bytes", flush=True)

    rng = random.Random(args.seed)
    plain_docs = [chapter_text(c) for c in train]
    convs = chat_conversations(rng, train, args.chat_rounds)
    tok_texts = plain_docs + [m["content"] for conv in convs[:len(convs) // args.chat_rounds] for m in conv]
    t0 = time.time()
    raw_tok = train_tokenizer(tok_texts, args.vocab)
    hf_tok = wrap_tokenizer(raw_tok)
    samples = {"texts": ["In the beginning God created", "Psalms 23:1 The LORD is my shepherd; I shall not want.",
                         heldout_text[:500]],
               "chats": convs[:20]}
    check_tokenizer(hf_tok, raw_tok, samples)
    print(f"tokenizer: {raw_tok.get_vocab_size()} ids in {time.time() - t0:.1f}s", flush=True)

    docs = [BOS + d + EOS for d in plain_docs] + [render_chat(c) for c in convs]
    rng.shuffle(docs)
    enc = raw_tok.encode_batch(docs, add_special_tokens=False)
    stream = torch.tensor([i for e in enc for i in e.ids], dtype=torch.long)
    n_plain = sum(len(e.ids) for e, d in zip(enc, docs) if not d.startswith(BOS + "<|"))
    heldout_ids = raw_tok.encode(heldout_text, add_special_tokens=False).ids
    valid_ids = raw_tok.encode("".join(chapter_text(c) for c in valid), add_special_tokens=False).ids
    print(f"train stream: {len(stream)} tokens ({n_plain} plain, {len(stream) - n_plain} chat in "
          f"{len(convs)} conversations); held-out: {len(heldout_ids)} tokens; validation: {len(valid_ids)} "
          f"tokens ({', '.join(f'{b} {c}' for b, c, _ in valid)})", flush=True)

    # --- model and training ----------------------------------------------------------------
    config = LlamaConfig(
        vocab_size=raw_tok.get_vocab_size(), hidden_size=192, intermediate_size=448,
        num_hidden_layers=4, num_attention_heads=6, num_key_value_heads=2, head_dim=32,
        max_position_embeddings=1024, rms_norm_eps=1e-5, hidden_act="silu",
        tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=SPECIAL_TOKENS.index(BOS), eos_token_id=SPECIAL_TOKENS.index(EOS),
        pad_token_id=SPECIAL_TOKENS.index(PAD))
    T = args.seq_len
    stream_gpu = stream.to(device)
    offsets_base = torch.arange(T + 1, device=device)

    def windows(ids):
        t = torch.tensor(ids, dtype=torch.long, device=device)
        n = (len(ids) - 1) // T
        return t[:n * T].view(n, T), t[1:n * T + 1].view(n, T)

    held_xy, valid_xy = windows(heldout_ids), windows(valid_ids)

    def eval_loss(model, xy):
        model.eval()
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=xy[0], use_cache=False).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), xy[1].reshape(-1)).item()
        model.train()
        return loss

    def train_run(steps):
        """Trains a fresh model for `steps` steps of a full warmup + cosine schedule."""
        torch.manual_seed(args.seed)
        model = LlamaForCausalLM(config).to(device)
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(), "embeddings not tied"
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)

        def lr_at(step):
            if step < args.warmup:
                return args.lr * (step + 1) / args.warmup
            progress = (step - args.warmup) / max(1, steps - args.warmup)
            return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))

        gen = torch.Generator(device=device)
        gen.manual_seed(args.seed)
        losses = torch.zeros(steps, device=device)
        curve = {"step": [], "validation": [], "heldout": []}
        model.train()
        torch.cuda.synchronize()
        t0 = time.time()
        for step in range(steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            starts = torch.randint(0, len(stream_gpu) - T - 1, (args.batch,), device=device, generator=gen)
            chunk = stream_gpu[starts[:, None] + offsets_base]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=chunk[:, :-1], use_cache=False).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), chunk[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses[step] = loss.detach()
            if (step + 1) % args.eval_every == 0 or step + 1 == steps:
                curve["step"].append(step + 1)
                curve["validation"].append(eval_loss(model, valid_xy))
                curve["heldout"].append(eval_loss(model, held_xy))
                print(f"[{steps}] step {step + 1:5d}  lr {lr_at(step):.2e}  train {losses[step].item():.4f}  "
                      f"validation {curve['validation'][-1]:.4f}  held-out {curve['heldout'][-1]:.4f}  "
                      f"{time.time() - t0:6.1f}s", flush=True)
        torch.cuda.synchronize()
        return model, {"steps": steps, "seconds": round(time.time() - t0, 1), "train_loss": losses.tolist(),
                       "curve": curve, "validation": curve["validation"][-1]}

    # The corpus is small enough to overfit, so the step count is chosen by validation loss
    # among full-schedule runs of each candidate length.
    model, run, runs = None, None, []
    for steps in sorted(int(s) for s in args.steps.split(",")):
        m, r = train_run(steps)
        runs.append(r)
        if run is None or r["validation"] < run["validation"]:
            model, run = m, r
        else:
            del m
    n_params = sum(p.numel() for p in model.parameters())
    assert n_params <= 10_000_000
    train_loss, train_seconds = run["train_loss"], run["seconds"]
    print(f"chose {run['steps']} steps (validation {run['validation']:.4f}): {n_params} parameters, "
          f"{run['steps']} x {args.batch} x {T} tokens in {train_seconds:.1f}s; candidates "
          f"{[(r['steps'], round(r['validation'], 4)) for r in runs]}", flush=True)

    # --- save and reload --------------------------------------------------------------------
    model.eval()
    gpu_ppl = {f"{c}/{s}": sliding_window_nll(model, heldout_ids, c, s, device) for c, s in ((512, 256), (256, 128))}
    print("held-out perplexity (GPU, f32):", {k: round(v["perplexity"], 4) for k, v in gpu_ppl.items()}, flush=True)
    model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                                               pad_token_id=config.pad_token_id, do_sample=False)
    model.to("cpu").to(torch.float32).save_pretrained(args.out)
    hf_tok.save_pretrained(args.out)
    # Keep the chat template inside tokenizer_config.json, where every loader looks.
    jinja = os.path.join(args.out, "chat_template.jinja")
    if os.path.exists(jinja):
        os.remove(jinja)
    tc_path = os.path.join(args.out, "tokenizer_config.json")
    with open(tc_path) as f:
        tc = json.load(f)
    tc["chat_template"] = CHAT_TEMPLATE
    with open(tc_path, "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)
        f.write("\n")
    sizes = {n: os.path.getsize(os.path.join(args.out, n)) for n in sorted(os.listdir(args.out))}
    print("checkpoint files:", sizes, "total", sum(sizes.values()), flush=True)

    from tokenizers import Tokenizer
    saved_raw = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    ref_tok = AutoTokenizer.from_pretrained(args.out)
    assert ref_tok.chat_template == CHAT_TEMPLATE, "chat template did not survive save/load"
    check_tokenizer(ref_tok, saved_raw, samples)
    for text in samples["texts"]:
        assert saved_raw.encode(text).ids == raw_tok.encode(text).ids, "saved tokenizer.json differs"
    ref = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32, attn_implementation="eager").eval()
    probe = torch.tensor([heldout_ids[:64]])
    with torch.no_grad():
        diff = (ref(input_ids=probe).logits - model(input_ids=probe).logits).abs().max().item()
    print(f"reloaded {type(ref).__name__} ({type(ref_tok).__name__}); max |logit diff| {diff:.2e}", flush=True)
    assert diff < 1e-3

    cpu_ppl = [sliding_window_nll(ref, heldout_ids, c, s, "cpu") for c, s in ((512, 256), (256, 128))]
    print("held-out perplexity (CPU, f32, reloaded):", [(r["context"], r["stride"], round(r["perplexity"], 4))
                                                        for r in cpu_ppl], flush=True)
    with open(heldout_path, "rb") as f:
        heldout_sha = hashlib.sha256(f.read()).hexdigest()
    ppl_doc = {
        "file": "heldout.txt", "sha256": heldout_sha, "tokens": len(heldout_ids),
        "tokenization": "tokenizer.json with add_special_tokens=False (no BOS)",
        "method": "sliding window: window k covers tokens [k*stride, min(k*stride+context, n)) and scores "
                  "the tokens from the previous window's end (first window: from token 1) to its end; "
                  "ppl = exp(sum NLL / (n-1))",
        "model": "models/tessera-kjv, float32, transformers on CPU (eager attention)",
        "results": cpu_ppl,
    }
    with open(os.path.join(args.fixtures, "perplexity.json"), "w") as f:
        json.dump(ppl_doc, f, indent=2)
        f.write("\n")

    # --- reference generations for the engine's tests ---------------------------------------
    eos_id = config.eos_token_id
    cases = [
        {"name": "raw_genesis", "kind": "raw", "prompt": "In the beginning God created"},
        {"name": "raw_matthew", "kind": "raw", "prompt": "Matthew 5:3 Blessed are the poor in spirit:"},
        {"name": "chat_psalm", "kind": "chat", "messages": [
            {"role": "system", "content": SYSTEM_PROMPTS[0]}, {"role": "user", "content": "Read Psalms 23:1-2."}]},
        {"name": "chat_locate", "kind": "chat", "messages": [
            {"role": "user", "content": "Where is this written?\nJesus wept."}]},
    ]
    for case in cases:
        if case["kind"] == "raw":
            case["add_special_tokens"] = True
            case["prompt_ids"] = saved_raw.encode(case["prompt"]).ids
        else:
            case["prompt"] = ref_tok.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True)
            case["add_special_tokens"] = False
            case["prompt_ids"] = saved_raw.encode(case["prompt"], add_special_tokens=False).ids
        assert list(ref_tok(case["prompt"], add_special_tokens=case["add_special_tokens"])["input_ids"]) == case["prompt_ids"]
        out, top_ids, top_lps, margin = greedy_reference(ref, case["prompt_ids"], 32, eos_id)
        case.update(generated_ids=out, generated_text=saved_raw.decode(out, skip_special_tokens=False),
                    top5_ids=top_ids, top5_logprobs=top_lps, min_top1_margin=round(margin, 6))
        with torch.no_grad():
            g = ref.generate(torch.tensor([case["prompt_ids"]]), max_new_tokens=32, do_sample=False,
                             eos_token_id=eos_id, pad_token_id=config.pad_token_id)
        case["matches_generate"] = g[0, len(case["prompt_ids"]):].tolist() == out
        print(f"[{case['name']}] {case['prompt']!r} -> {case['generated_text']!r} "
              f"(margin {margin:.4f}, generate agrees: {case['matches_generate']})", flush=True)
    gen_doc = {"model": "models/tessera-kjv", "dtype": "float32", "device": "cpu", "versions": versions,
               "decoding": "greedy, full forward each step; stops after eos_token_id or max_new_tokens",
               "max_new_tokens": 32, "eos_token_id": eos_id,
               "top5_logprobs": "log_softmax of the f32 logits (computed in f64) at each generated step",
               "cases": cases}
    with open(os.path.join(args.fixtures, "reference_generations.json"), "w") as f:
        json.dump(gen_doc, f, indent=1)
        f.write("\n")

    # --- docs: loss curve, samples and the run log -------------------------------------------
    torch.manual_seed(args.seed)
    sample_prompts = ["Genesis 1:1", "John 3:16 For God so loved the world,", "In the beginning God created",
                      "And the LORD spake unto Moses, saying,"]
    samples_out = []
    for p in sample_prompts:
        ids = torch.tensor([saved_raw.encode(p).ids])
        with torch.no_grad():
            greedy = ref.generate(ids, max_new_tokens=80, do_sample=False, pad_token_id=config.pad_token_id)
            sampled = ref.generate(ids, max_new_tokens=80, do_sample=True, temperature=0.8, top_p=0.95,
                                   pad_token_id=config.pad_token_id)
        samples_out.append({"prompt": p, "greedy": ref_tok.decode(greedy[0, ids.shape[1]:]),
                            "sampled_t0.8_p0.95": ref_tok.decode(sampled[0, ids.shape[1]:])})
    for c in cases:
        if c["kind"] == "chat":
            with torch.no_grad():
                g = ref.generate(torch.tensor([c["prompt_ids"]]), max_new_tokens=120, do_sample=False,
                                 eos_token_id=eos_id, pad_token_id=config.pad_token_id)
            samples_out.append({"messages": c["messages"], "greedy": ref_tok.decode(g[0, len(c["prompt_ids"]):])})
    for s in samples_out:
        print("sample:", json.dumps(s), flush=True)
    plot_loss(os.path.join(args.docs, "trained-model-loss.png"), run, runs,
              f"tessera-kjv: {n_params / 1e6:.2f}M params, {run['steps']} steps, held-out ppl "
              f"{cpu_ppl[0]['perplexity']:.2f} (context 512, stride 256)")
    run_log = {
        "versions": versions, "gpu": torch.cuda.get_device_name(0), "seed": args.seed,
        "corpus": {"command": 'bible -f "Genesis 1:1-Revelation 22:21"', "sha256": corpus_sha,
                   "chapters": len(chapters), "heldout_chapters": [f"{b} {c}" for b, c, _ in held],
                   "validation_chapters": [f"{b} {c}" for b, c, _ in valid]},
        "train_tokens": len(stream), "plain_tokens": n_plain, "conversations": len(convs),
        "params": n_params, "config": json.loads(config.to_json_string()),
        "steps": run["steps"], "batch": args.batch, "seq_len": T, "lr": args.lr, "warmup": args.warmup,
        "tokens_seen": run["steps"] * args.batch * T, "train_seconds": train_seconds,
        "final_train_loss_mean_last_50": sum(train_loss[-50:]) / len(train_loss[-50:]),
        "candidates": [{"steps": r["steps"], "seconds": r["seconds"], "validation": r["validation"],
                        "heldout": r["curve"]["heldout"][-1]} for r in runs],
        "curve": run["curve"], "train_loss": train_loss,
        "perplexity_gpu": gpu_ppl, "perplexity_cpu": cpu_ppl, "checkpoint_bytes": sizes, "samples": samples_out,
    }
    with open(os.path.join(args.docs, "trained-model-run.json"), "w") as f:
        json.dump(run_log, f, indent=1)
        f.write("\n")
    assert sum(sizes.values()) <= 10_000_000, "checkpoint over 10 MB"
    print("done", flush=True)


if __name__ == "__main__":
    main()
