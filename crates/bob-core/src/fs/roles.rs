//! Block-write roles in a trace: a research design tells bob what each block it writes
//! holds ([`researchfs::Role`]), and bob keeps that next to the write so that crash states
//! can drop exactly the writes of a role (the `drop-role` strategy).
//!
//! The role travels in two places. In the log, inside the write's flags, in bits
//! [`ROLE_SHIFT`]`..+4` (role index + 1; 0 = unknown), because the permuter sees only the
//! trace: the dm-log-writes format defines the low five bits, bob's reader and writer
//! keep the rest as they are, and `replay-log` ignores them on writes. In the sidecar, as
//! a readable `roles` list ([`role_list`]). Every non-data role also sets
//! [`flags::METADATA`], as REQ_META would, so tools that only know that flag see the
//! metadata/data split.

use researchfs::Role;

use crate::trace::{flags, Entry, EntryKind, Trace};

/// First bit of the role field in a write's flags.
const ROLE_SHIFT: u32 = 8;
const ROLE_MASK: u64 = 0xf << ROLE_SHIFT;

/// The flags that mark a write of `role` (role bits, plus METADATA for every role but
/// data).
pub(crate) fn role_flags(role: Role) -> u64 {
    let index = Role::ALL.iter().position(|&r| r == role).unwrap_or(0) as u64;
    let meta = if role == Role::Data { 0 } else { flags::METADATA };
    ((index + 1) << ROLE_SHIFT) | meta
}

/// The role recorded with a write entry, if any.
pub(crate) fn entry_role(entry: &Entry) -> Option<Role> {
    if !matches!(entry.kind(), EntryKind::Write { .. }) {
        return None;
    }
    let index = ((entry.flags & ROLE_MASK) >> ROLE_SHIFT) as usize;
    index.checked_sub(1).and_then(|i| Role::ALL.get(i).copied())
}

/// `(entry index, role)` of every write of `trace` that carries a role, in order.
pub(crate) fn role_list(trace: &Trace) -> Vec<(usize, Role)> {
    trace.entries.iter().enumerate().filter_map(|(i, e)| Some((i, entry_role(e)?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_round_trips_through_flags_and_only_data_is_not_metadata() {
        for role in Role::ALL {
            let mut e = Entry::write(8, vec![0; 4096]);
            e.flags |= role_flags(role);
            assert_eq!(entry_role(&e), Some(role));
            assert_eq!(e.is_metadata(), role != Role::Data, "{role}");
            assert!(matches!(e.kind(), EntryKind::Write { preflush: false, fua: false }));
        }
        assert_eq!(entry_role(&Entry::write(8, vec![0; 512])), None);
        assert_eq!(entry_role(&Entry::flush()), None);
    }

    #[test]
    fn roles_survive_the_log_format() {
        let mut e = Entry::write(8, vec![7; 4096]);
        e.flags |= role_flags(Role::Indirect);
        let trace = Trace::new(512, vec![Entry::mark("x"), e, Entry::flush()]);
        let mut bytes = Vec::new();
        crate::trace::log::write_log(&mut bytes, &trace).unwrap();
        let back = crate::trace::log::read_log(std::io::Cursor::new(bytes)).unwrap();
        assert_eq!(role_list(&back), vec![(1, Role::Indirect)]);
    }
}
