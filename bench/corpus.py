"""Generate a reproducible bilingual corpus (markdown, text, HTML; Chinese, English, mixed) for benchmarks.

python -m bench.corpus OUT_DIR --files 1000 --dirs 40 [--seed 7]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

ZH = (
    "小米 15 Pro 的电池容量是 6100mAh，支持 90W 快充。",
    "向量数据库用于存储和检索高维嵌入。",
    "本地知识库可以离线搜索笔记和手册。",
    "文件被修改后，代理会在一秒内重新索引。",
    "我们用倒排索引支持中文关键词检索。",
    "这份说明书介绍了安装步骤和常见故障。",
    "如果嵌入服务返回 429，客户端会按 Retry-After 重试。",
    "会议纪要：下周发布 2.4 版本，修复同步延迟。",
    "数据备份每天凌晨三点执行，保留三十天。",
    "请勿在生产环境直接修改配置文件。",
)
EN = (
    "Backpropagation computes gradients layer by layer.",
    "Kubernetes pods share a network namespace.",
    "The agent watches folders and keeps the index in sync.",
    "Error ERR_CONN_RESET means the peer closed the socket.",
    "Call parse_config() before starting the server.",
    "Hybrid search fuses dense vectors with BM25 keywords.",
    "The manual explains installation and troubleshooting steps.",
    "Rate limits are answered with HTTP 429.",
    "Backups run nightly at 3am and are kept for thirty days.",
    "Never edit the production configuration by hand.",
)


def paragraph(rng: random.Random, kind: str) -> str:
    pool = ZH if kind == "zh" else EN if kind == "en" else ZH + EN
    sep = "" if kind == "zh" else " "
    return sep.join(rng.choice(pool) for _ in range(rng.randint(3, 8))).strip()


def document(rng: random.Random, ext: str, target: int, kind: str | None = None) -> str:
    """One document of about `target` bytes; `kind` ("zh", "en" or "mixed") is drawn when not given."""
    kind = kind or rng.choice(("zh", "en", "mixed"))
    title = f"Note {rng.randint(1, 99999)} {rng.choice(ZH)[:8]}"
    paras: list[str] = []
    size = 0
    while size < target:
        p = paragraph(rng, kind)
        paras.append(p)
        size += len(p.encode())
    if ext == ".md":
        body = "\n\n".join(f"## Section {i}\n\n{p}" if i % 3 == 0 else p for i, p in enumerate(paras))
        return f"# {title}\n\n{body}\n"
    if ext == ".html":
        body = "".join(
            f"<h2>Section {i}</h2><p>{p}</p>" if i % 3 == 0 else f"<p>{p}</p>" for i, p in enumerate(paras)
        )
        return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}</body></html>\n"
    return f"{title}\n\n" + "\n\n".join(paras) + "\n"


def generate(out: Path, files: int, dirs: int, seed: int = 7, mean_bytes: int = 5000) -> list[Path]:
    rng = random.Random(seed)
    folders = [out] + [out / f"d{i:03d}" / (f"s{i % 5}" if i % 3 == 0 else "") for i in range(1, dirs)]
    written = []
    for n in range(files):
        folder = folders[n % len(folders)]
        folder.mkdir(parents=True, exist_ok=True)
        ext = rng.choice((".md", ".md", ".txt", ".html"))
        path = folder / f"doc{n:05d}{ext}"
        path.write_text(document(rng, ext, int(rng.expovariate(1 / mean_bytes)) + 200), encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--dirs", type=int, default=40)
    ap.add_argument("--mean-bytes", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    paths = generate(a.out, a.files, a.dirs, a.seed, a.mean_bytes)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} files, {total / 1e6:.1f} MB in {a.out}")


if __name__ == "__main__":
    main()
