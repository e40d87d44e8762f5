# The project's differential ExUnit tests, run without Mix on whatever device the app selects
# (the lent H200 host has no Mix project, only the compiled apps on ERL_LIBS): every callback
# against Nx.BinaryBackend for all device dtypes, special values and gradients, as on lavapipe.
#
#   elixir bench/gpu_suite.exs [test files...]     (default: the device-independent suites)
# Tests that start a child VM with mix need a Mix project (the H200 host has none).
ExUnit.start(seed: 0, max_cases: 4, exclude: [:subprocess])
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
Nx.global_default_backend(Nx.Vulkan.Backend)
Code.require_file("test/support/device_case.ex")

files =
  case System.argv() do
    [] ->
      ~w(differential elementwise reduce_dot layout generated_shapes mnist_step exactness edge_values large host_sync compiler)
      |> Enum.map(&"test/nx_vulkan/#{&1}_test.exs")

    files ->
      files
  end

IO.puts(
  "device: #{Nx.Vulkan.Device.info().name}, commit #{System.get_env("NXV_COMMIT", "unknown")}"
)

Enum.each(files, &Code.require_file/1)
%{failures: failures} = ExUnit.run()
System.halt(if failures == 0, do: 0, else: 1)
