# Every test runs with Nx.Vulkan.Backend as the default backend, in every process.
Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.Vulkan.ResidencyRegister.start()
ExUnit.after_suite(fn _ -> Nx.Vulkan.ResidencyRegister.report() end)
# Ten minutes a test, not ExUnit's one: the timeout is for hangs, and wall time here says little
# of the work. On lavapipe a kernel's first use compiles its pipeline (LLVM) on the pipeline
# builder threads, one of them on this project's 2-core machine kind, and four async modules
# and their child VMs share the two cores: a test waits behind the others' compiles and kernels.
# "float unary ops, f32, seed 5" takes 19 s alone on a slower host of this kind and passed 60 s
# in the full suite there (2026-12-04); a GPU-variants child VM takes 62-70 s alone here and
# several times that beside the other async tests (2026-12-06). A hang still fails.
ExUnit.start(timeout: 600_000)
