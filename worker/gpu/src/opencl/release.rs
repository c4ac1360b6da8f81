//! OpenCL objects released by hand: `opencl3`'s own drops panic when the driver fails a release, and the
//! release build aborts on a panic, so a device in trouble would end the worker (again at each restart, on
//! the same device) instead of handing its batch to the CPU. A [`Quiet`] object is released when dropped,
//! a failed release logged and otherwise ignored (the driver keeps or frees the memory; nothing counted
//! depends on it).

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem};
use opencl3::program::Program;

/// An OpenCL object that [`Quiet`] can release itself.
pub trait Release: Sized {
    /// Releases the object, never panicking; `Err` with the driver's error code where it failed.
    fn release(self) -> Result<(), i32>;
}

/// Forgets `object` (so that its own drop, which panics on a failed release, never runs) and releases
/// its handle with `free`.
fn release_with<T, H>(
    object: T,
    handle: impl FnOnce(&T) -> H,
    free: unsafe fn(H) -> Result<(), i32>,
) -> Result<(), i32> {
    let raw = handle(&object);
    std::mem::forget(object);
    // SAFETY: `raw` is the handle `object` owned, released once here (its owner is forgotten above).
    unsafe { free(raw) }
}

impl<T> Release for Buffer<T> {
    fn release(self) -> Result<(), i32> {
        release_with(self, |b| b.get(), opencl3::memory::release_mem_object)
    }
}

impl Release for Event {
    fn release(self) -> Result<(), i32> {
        release_with(self, Event::get, opencl3::event::release_event)
    }
}

impl Release for Kernel {
    fn release(self) -> Result<(), i32> {
        release_with(self, Kernel::get, opencl3::kernel::release_kernel)
    }
}

impl Release for Program {
    fn release(self) -> Result<(), i32> {
        release_with(self, Program::get, opencl3::program::release_program)
    }
}

impl Release for CommandQueue {
    fn release(self) -> Result<(), i32> {
        release_with(
            self,
            CommandQueue::get,
            opencl3::command_queue::release_command_queue,
        )
    }
}

impl Release for Context {
    fn release(self) -> Result<(), i32> {
        // The context's list of devices is forgotten with it: a few words, once per device opened.
        release_with(
            self,
            Context::get,
            opencl3::context::context::release_context,
        )
    }
}

/// An OpenCL object released quietly when dropped (see the module text).
pub struct Quiet<T: Release>(ManuallyDrop<T>);

impl<T: Release> Quiet<T> {
    pub fn new(object: T) -> Quiet<T> {
        Quiet(ManuallyDrop::new(object))
    }
}

impl<T: Release> Drop for Quiet<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again.
        let object = unsafe { ManuallyDrop::take(&mut self.0) };
        if let Err(code) = object.release() {
            tracing::warn!(
                object = std::any::type_name::<T>(),
                code,
                "OpenCL failed to release an object (the device may be in trouble); going on"
            );
        }
    }
}

impl<T: Release> Deref for Quiet<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Release> DerefMut for Quiet<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
