# Every test runs with Nx.Vulkan.Backend as the default backend, in every process.
Nx.global_default_backend(Nx.Vulkan.Backend)
Nx.Vulkan.ResidencyRegister.start()
ExUnit.after_suite(fn _ -> Nx.Vulkan.ResidencyRegister.report() end)
ExUnit.start()
