//! STYLE house rule 4: the warm allow path does not allocate. A counting global
//! allocator watches parse + evaluate of an allowed 200-byte `tools/call` 1000 times.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use mcpwall::frame::{Frame, Limits, Parsed};
use mcpwall::program::Program;
use support::{TestEnv, packs};

struct Counting;

thread_local! {
    /// Allocations made by this thread while counting is on (other test threads and
    /// the harness do not disturb it).
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn note_allocation() {
    let _ = COUNT.try_with(|c| {
        if let Some(n) = c.get() {
            c.set(Some(n + 1));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn count_allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(Some(0)));
    f();
    COUNT.with(|c| c.replace(None)).unwrap_or(0)
}

#[test]
fn warm_allow_path_does_not_allocate() {
    let env = TestEnv::new();
    let policy = support::load_policy(packs::DEFAULT_LIKE, &env);
    let program = Program::compile_with(&policy, &env.env).expect("compiles");
    let line = packs::allowed_call(&env);
    assert!(
        (190..=230).contains(&line.len()),
        "frame is {} bytes",
        line.len()
    );
    let mut parsed = Parsed::new();
    let mut scratch = program.scratch();
    let limits = Limits::default();

    let mut run = |parsed: &mut Parsed| {
        parsed.parse(line.as_bytes(), &limits).expect("parses");
        let frame = Frame::new(line.as_bytes(), parsed);
        let msg = &frame.messages()[0];
        let verdict = program.evaluate_request(&frame, msg, &mut scratch);
        assert!(verdict.is_allowed(), "{verdict:?}");
    };
    for _ in 0..10 {
        run(&mut parsed);
    }
    let allocations = count_allocations(|| {
        for _ in 0..1000 {
            run(&mut parsed);
        }
    });
    assert_eq!(allocations, 0, "the warm allow path allocated");
}

#[test]
fn counting_allocator_sees_allocations() {
    // Guards the test above against a counter that never counts.
    let n = count_allocations(|| {
        let v: Vec<u8> = Vec::with_capacity(std::hint::black_box(64));
        std::hint::black_box(v);
    });
    assert_eq!(n, 1);
}
