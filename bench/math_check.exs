# Compares the device's transcendental functions with Nx.BinaryBackend on 100k random inputs and
# prints how many results are bit-identical (f32) or within 1 ulp (f64). A correctness check to
# run on new devices (the H200's kernels differ from lavapipe's: see SHARED_TABLE in math64.glsl).
{:ok, _} = Application.ensure_all_started(:nx_vulkan)
key = Nx.Random.key(5)

for type <- [:f32, :f64], op <- [:exp, :tanh, :sigmoid, :log, :expm1, :sin, :cos] do
  {host, _} =
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      Nx.Random.uniform(key, -20.0, 20.0, shape: {100_000}, type: type)
    end)

  host = if op == :log, do: Nx.abs(host), else: host
  expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(Nx, op, [host]) end)

  actual =
    apply(Nx, op, [Nx.backend_transfer(host, Nx.Vulkan.Backend)])
    |> Nx.backend_transfer(Nx.BinaryBackend)

  bits = if type == :f32, do: 32, else: 64
  e = for <<x::signed-size(bits)-native <- Nx.to_binary(expected)>>, do: x
  a = for <<x::signed-size(bits)-native <- Nx.to_binary(actual)>>, do: x
  diffs = Enum.zip_with(e, a, &abs(&1 - &2))

  IO.puts(
    "#{type} #{op}: #{Enum.count(diffs, &(&1 == 0))} identical, #{Enum.count(diffs, &(&1 <= 1))} within 1 ulp, max #{Enum.max(diffs)} ulp, of #{length(diffs)}"
  )
end
