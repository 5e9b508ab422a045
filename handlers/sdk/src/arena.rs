//! A bump allocator for a handler component's heap.
//!
//! The host runs every call in a fresh instance and resets its linear memory
//! afterwards, so nothing a call allocates outlives it: freeing memory only
//! matters within one call. [`CallArena`] hands out memory from a fixed
//! region in the component's zero-initialised data (`.bss`), which is part of
//! the instance's initial memory: no `memory.grow` (and none of the host's
//! `mprotect` calls behind it) and no free-list work per allocation. Freeing
//! or growing the most recent allocation is done in place (a `String` or
//! `Vec` being pushed to); other frees are dropped. When the region is full,
//! allocations go to the system allocator (wasi-libc's dlmalloc), so a call
//! that allocates a lot uses at most the region's size more memory than it
//! would without the arena, under the same memory limit.
//!
//! A handler opts in for its component only:
//!
//! ```
//! #[cfg(target_arch = "wasm32")]
//! #[global_allocator]
//! static ALLOCATOR: dial_handler_sdk::arena::CallArena<{ 1 << 20 }> = dial_handler_sdk::arena::CallArena::new();
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::ptr;

/// `BYTES` of bump-allocated memory, then the system allocator.
pub struct CallArena<const BYTES: usize> {
    region: UnsafeCell<[u8; BYTES]>,
    /// Bytes of `region` handed out (the next allocation starts at or after it).
    used: Cell<usize>,
}

// A component instance is single-threaded (wasm32 without the `atomics`
// feature has no threads), which is what a `static` global allocator needs.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl<const BYTES: usize> Sync for CallArena<BYTES> {}

impl<const BYTES: usize> Default for CallArena<BYTES> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const BYTES: usize> CallArena<BYTES> {
    pub const fn new() -> Self {
        Self { region: UnsafeCell::new([0; BYTES]), used: Cell::new(0) }
    }

    /// Bytes of the region in use (for tests and diagnostics).
    pub fn used(&self) -> usize {
        self.used.get()
    }

    fn base(&self) -> usize {
        self.region.get() as usize
    }

    fn contains(&self, ptr: *mut u8) -> bool {
        let addr = ptr as usize;
        addr >= self.base() && addr < self.base() + BYTES
    }

    /// Whether `ptr` (of `size` bytes) is the last allocation handed out.
    fn is_last(&self, ptr: *mut u8, size: usize) -> bool {
        ptr as usize + size == self.base() + self.used.get()
    }

    /// The region's next `layout`-sized block, or null when it does not fit.
    fn bump(&self, layout: Layout) -> *mut u8 {
        let base = self.base();
        let start = (base + self.used.get()).next_multiple_of(layout.align());
        match start.checked_add(layout.size()) {
            Some(end) if end <= base + BYTES => {
                self.used.set(end - base);
                // Derived from the region's pointer, so it keeps its provenance.
                self.region.get().cast::<u8>().wrapping_add(start - base)
            }
            _ => ptr::null_mut(),
        }
    }
}

unsafe impl<const BYTES: usize> GlobalAlloc for CallArena<BYTES> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let block = self.bump(layout);
        if block.is_null() { unsafe { System.alloc(layout) } } else { block }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.contains(ptr) {
            return unsafe { System.dealloc(ptr, layout) };
        }
        if self.is_last(ptr, layout.size()) {
            self.used.set(ptr as usize - self.base());
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let block = self.bump(layout);
        if block.is_null() {
            return unsafe { System.alloc_zeroed(layout) };
        }
        // Memory given back by `dealloc`/`realloc` may be handed out again.
        unsafe { block.write_bytes(0, layout.size()) };
        block
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !self.contains(ptr) {
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        let offset = ptr as usize - self.base();
        if self.is_last(ptr, layout.size()) && offset.checked_add(new_size).is_some_and(|end| end <= BYTES) {
            self.used.set(offset + new_size);
            return ptr;
        }
        if new_size <= layout.size() {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return ptr::null_mut();
        };
        let block = unsafe { self.alloc(new_layout) };
        if !block.is_null() {
            unsafe {
                ptr::copy_nonoverlapping(ptr, block, layout.size());
                self.dealloc(ptr, layout);
            }
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn allocations_are_aligned_and_inside_the_region_until_it_is_full() {
        let arena = Box::new(CallArena::<256>::new());
        unsafe {
            let a = arena.alloc(layout(3, 1));
            let b = arena.alloc(layout(8, 8));
            assert!(arena.contains(a) && arena.contains(b));
            assert_eq!(b as usize % 8, 0);
            assert!(b as usize >= a as usize + 3);
            // Too big for what is left: the system allocator answers.
            let big = arena.alloc(layout(512, 8));
            assert!(!big.is_null() && !arena.contains(big));
            big.write_bytes(7, 512);
            arena.dealloc(big, layout(512, 8));
            // Freeing the newest allocation gives its bytes back; an older one stays.
            arena.dealloc(b, layout(8, 8));
            assert_eq!(arena.used(), b as usize - arena.base());
            let c = arena.alloc(layout(8, 8));
            assert_eq!(c, b);
            arena.dealloc(a, layout(3, 1));
            assert_eq!(arena.used(), c as usize + 8 - arena.base());
        }
    }

    #[test]
    fn the_last_allocation_grows_and_shrinks_in_place() {
        let arena = Box::new(CallArena::<256>::new());
        unsafe {
            let a = arena.alloc(layout(16, 4));
            a.write_bytes(1, 16);
            let grown = arena.realloc(a, layout(16, 4), 64);
            assert_eq!(grown, a);
            assert_eq!(arena.used(), 64 + (a as usize - arena.base()));
            let shrunk = arena.realloc(grown, layout(64, 4), 8);
            assert_eq!(shrunk, a);
            assert_eq!(*shrunk.add(7), 1);
        }
    }

    #[test]
    fn growing_an_earlier_allocation_copies_it_and_a_full_region_moves_it_out() {
        let arena = Box::new(CallArena::<128>::new());
        unsafe {
            let a = arena.alloc(layout(16, 1));
            for i in 0..16 {
                *a.add(i) = i as u8;
            }
            let b = arena.alloc(layout(16, 1));
            let moved = arena.realloc(a, layout(16, 1), 32);
            assert_ne!(moved, a);
            assert!(arena.contains(moved));
            assert_eq!(std::slice::from_raw_parts(moved, 16), (0..16).collect::<Vec<u8>>().as_slice());
            // The last allocation cannot grow past the region: it moves to the system allocator.
            let out = arena.realloc(moved, layout(32, 1), 4096);
            assert!(!arena.contains(out));
            assert_eq!(std::slice::from_raw_parts(out, 16), (0..16).collect::<Vec<u8>>().as_slice());
            let grown = arena.realloc(out, layout(4096, 1), 8192);
            assert_eq!(*grown.add(15), 15);
            arena.dealloc(grown, layout(8192, 1));
            arena.dealloc(b, layout(16, 1));
        }
    }

    #[test]
    fn zeroed_memory_is_zero_even_where_a_freed_block_was() {
        let arena = Box::new(CallArena::<128>::new());
        unsafe {
            let a = arena.alloc(layout(32, 1));
            a.write_bytes(0xff, 32);
            arena.dealloc(a, layout(32, 1));
            let z = arena.alloc_zeroed(layout(32, 1));
            assert_eq!(z, a);
            assert!(std::slice::from_raw_parts(z, 32).iter().all(|&b| b == 0));
        }
    }
}
