//! nx_vulkan's NIF library. This file only declares modules and registers the NIFs (rustler
//! collects every `#[rustler::nif]` and `#[rustler::resource_impl]` in the crate).
mod capture;
mod checks;
mod context;
mod device;
mod dtype;
mod error;
mod events;
mod exit_guard;
mod fuse;
mod loops;
mod memory;
mod ops;
mod peephole;
mod pipeline_disk_cache;
mod pipelines;
mod policy;
mod queue;
mod shaders;
mod tensor;
mod window_fuse;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

rustler::init!("Elixir.Nx.Vulkan.NIF", load = load);

/// Opens the resource type of tensor buffers, which has a handle of its own (tensor.rs
/// BufferRef); rustler registers the other resource types before this runs.
fn load(env: rustler::Env, _info: rustler::Term) -> bool {
    tensor::open_buffer_type(env)
}
