//! The project's own file systems (in progress).
