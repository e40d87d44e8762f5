# Every test runs with Nx.Vulkan.Backend as the default backend, in every process.
Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.Vulkan.ResidencyRegister.start()
ExUnit.after_suite(fn _ -> Nx.Vulkan.ResidencyRegister.report() end)
# Five minutes a test, not ExUnit's one: on lavapipe a kernel's first use compiles its pipeline
# (LLVM) on the pipeline builder threads, one of them on this project's 2-core machine kind, so
# a test that first-uses many kernels waits behind the compiles of the modules running beside
# it. "float unary ops, f32, seed 5" takes 19 s alone on a slower host of this kind and passed
# 60 s in the full suite there (2026-12-04); a hang still fails, five minutes later.
ExUnit.start(timeout: 300_000)
