//! Deterministic bytes that do not compress, for tests and benchmarks that
//! need payloads stored as they are (ZIP entries kept, not deflated).
//!
//! Include it with `#[path = "…/tests/random_bytes.rs"] mod random_bytes;`.

/// `len` bytes of xorshift64* from `seed` (the same seed, the same bytes).
pub fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}
