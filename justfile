# Everyday commands. `cargo install just` if you do not have it.

# Install the file-system tools bob drives (Debian).
setup:
    apt-get update -qq && apt-get install -y -qq e2fsprogs xfsprogs btrfs-progs fuse3 sqlite3

# Every test (what CI runs).
test:
    bash scripts/test.sh

# The main job: one property on one configuration.
run fs="ext4-ordered" property="single-block-append":
    cargo run --release -p bob-cli -- run --fs {{fs}} --property {{property}}

# Lints as CI would want them.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# The full persistence-property table (every property x every configuration) under both
# disk models and every drain schedule, with the generated results document for this
# kernel. Hours on two cores: rerun the same command to resume after an interruption.
table:
    cargo run --release -p bob-cli -- table --atomic-write-unit 512,4096 --resume --out bob-out/table --doc docs/results-linux-$(uname -r).md

# bob's engine against the naive per-state pipeline and the mount floor, plus the
# recorder's overhead, on ext4-ordered and xfs (root; see docs/performance.md).
bench:
    cargo run --release -p bob-cli -- bench --fs ext4-ordered
    cargo run --release -p bob-cli -- bench --fs xfs

# A whole ext4-ordered table, shortcuts on against off (table_speedup).
bench-table:
    cargo run --release -p bob-cli -- bench --table --fs ext4-ordered

# The whole default table (both disk models, every schedule) timed four ways against the
# 30-minute target: recording, checking saved recordings, a shortcuts-off sample, and the
# table recording as it checks (hours on 2 cores: docs/performance.md).
bench-table-full:
    cargo run --release -p bob-cli -- bench --table --full

# researchfs: NoFS vs orderless vs ordered-core over FUSE on an image file (docs/researchfs.md).
bench-researchfs scale="1":
    cargo run --release -p researchfs --example bench -- --scale {{scale}}

# At least 10,000 crash states in one process; memory, fds and leaks measured (root).
stress:
    bash scripts/stress.sh
