defmodule Nx.Vulkan.DeviceCase do
  @moduledoc false
  # Differential testing against Nx.BinaryBackend: run a function on device tensors and on host
  # copies of the same inputs, then check shape, type, residency (the result is a
  # Nx.Vulkan.Backend tensor and nothing fell back to the host) and values.
  use ExUnit.CaseTemplate
  alias Nx.Vulkan.Fallback

  using do
    quote do
      import Nx.Vulkan.DeviceCase
    end
  end

  setup context do
    tag = {context.module, context.test}
    Fallback.tag_process(tag)
    {:ok, fallback_tag: tag}
  end

  @doc "A setup callback (`setup :keep_batch_max`): the test may change the batch cap; it is restored after."
  def keep_batch_max(_context) do
    previous = Nx.Vulkan.batch_max()
    on_exit(fn -> Nx.Vulkan.set_batch_max(previous) end)
    :ok
  end

  @doc "Runs `script` in a child VM of this project (`mix run`) with `env`; returns its output."
  def mix_run!(script, env) do
    {output, 0} =
      System.cmd("mix", ["run", "--no-compile", "--no-deps-check", "-e", script],
        env: [{"MIX_ENV", "test"} | env],
        stderr_to_stdout: true
      )

    output
  end

  @doc "A device tensor from a list/number, as Nx.tensor/2 would build it."
  def dev(data, opts \\ []), do: Nx.tensor(data, Keyword.put(opts, :backend, Nx.Vulkan.Backend))

  @doc "Deterministic pseudo-random f32/f64 data of `shape` in [-scale, scale)."
  def random(shape, type \\ :f32, scale \\ 4.0, seed \\ 7) do
    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      key = Nx.Random.key(seed)
      {t, _} = Nx.Random.uniform(key, -scale, scale, shape: shape, type: type)
      t
    end)
    |> Nx.backend_transfer(Nx.Vulkan.Backend)
  end

  @doc """
  Runs `fun` on `args` (device tensors) and on their host copies; asserts the device result
  matches, stays on the device, and that nothing fell back. Options: `:atol`, `:rtol` (default
  exact), `:fallback` (true when the op is expected to use the host fallback).
  """
  def assert_device(fun, args, opts \\ []) do
    before = Fallback.tagged(Process.get(:nx_vulkan_fallback_tag))
    actual = apply(fun, args)
    fell_back = Fallback.tagged(Process.get(:nx_vulkan_fallback_tag)) - before

    host_args = Enum.map(args, &to_host/1)
    expected = Nx.with_default_backend(Nx.BinaryBackend, fn -> apply(fun, host_args) end)

    if opts[:fallback] do
      assert fell_back > 0, "expected a host fallback"
    else
      assert fell_back == 0,
             "#{fell_back} op(s) fell back to the host: #{inspect(Fallback.reasons())}"
    end

    compare(actual, expected, opts)

    unless opts[:fallback] == true or System.get_env("NXV_TEST_COMPILER") == "0",
      do: assert_compiles_alike(fun, args, actual)

    actual
  end

  # The same function through `compiler: Nx.Vulkan` gives the eager result bit for bit, where
  # it runs under defn at all (all arguments tensors, and Nx.Defn.Evaluator traces it).
  defp assert_compiles_alike(fun, args, actual) do
    evaluator =
      if Enum.all?(args, &match?(%Nx.Tensor{}, &1)) do
        try do
          {:ok, apply(Nx.Defn.jit(fun), args)}
        rescue
          _ -> :not_defn
        end
      else
        :not_defn
      end

    with {:ok, evaluated} <- evaluator do
      compiled = apply(Nx.Defn.jit(fun, compiler: Nx.Vulkan), args)

      assert bits(compiled) == bits(evaluated),
             "compiler: Nx.Vulkan differs from the Evaluator for #{inspect(fun)}"

      assert bits(evaluated) == bits(actual) or not all_tensors?(actual),
             "the Evaluator differs from eager ops for #{inspect(fun)}"
    end
  end

  defp all_tensors?(result),
    do: Nx.Defn.Composite.flatten_list([result]) |> Enum.all?(&match?(%Nx.Tensor{}, &1))

  defp bits(result) do
    [result]
    |> Nx.Defn.Composite.flatten_list()
    |> Enum.map(fn t -> {t.shape, t.type, Nx.to_binary(t)} end)
  end

  defp to_host(%Nx.Tensor{} = t), do: Nx.backend_copy(t, Nx.BinaryBackend)
  defp to_host(other), do: other

  def compare(actual, expected, opts) when is_tuple(actual) do
    actual
    |> Tuple.to_list()
    |> Enum.zip(Tuple.to_list(expected))
    |> Enum.each(fn {a, e} -> compare(a, e, opts) end)
  end

  def compare(%Nx.Tensor{} = actual, %Nx.Tensor{} = expected, opts) do
    assert %Nx.Vulkan.Backend{} = actual.data,
           "result is not on the device: #{inspect(actual.data.__struct__)}"

    assert actual.type == expected.type
    assert actual.shape == expected.shape
    assert actual.names == expected.names
    host = Nx.backend_copy(actual, Nx.BinaryBackend)

    Nx.with_default_backend(Nx.BinaryBackend, fn ->
      cond do
        # Nx.Testing's comparisons fail inside on zero-size tensors (the BinaryBackend's equal).
        Nx.size(expected) == 0 ->
          assert Nx.to_binary(host) == Nx.to_binary(expected)

        !(opts[:atol] || opts[:rtol]) ->
          Nx.Testing.assert_equal(host, expected)

        match?({:c, _}, expected.type) ->
          Nx.Testing.assert_all_close(host, expected,
            atol: opts[:atol] || 0.0,
            rtol: opts[:rtol] || 0.0
          )

        true ->
          assert_close(host, expected, opts[:atol] || 0.0, opts[:rtol] || 0.0)
      end
    end)
  end

  # Element by element: NaN only matches NaN, infinities match exactly, finite values within
  # atol + rtol |expected|. Reports the first mismatches with their flat index.
  defp assert_close(actual, expected, atol, rtol) do
    mismatches =
      Enum.zip([Nx.to_flat_list(actual), Nx.to_flat_list(expected), Stream.iterate(0, &(&1 + 1))])
      |> Enum.reject(fn
        {a, a, _} -> true
        {a, e, _} when is_number(a) and is_number(e) -> abs(a - e) <= atol + rtol * abs(e)
        _ -> false
      end)

    if mismatches != [] do
      shown =
        mismatches
        |> Enum.take(5)
        |> Enum.map_join(", ", fn {a, e, i} -> "[#{i}] #{inspect(a)} (expected #{inspect(e)})" end)

      flunk(
        "#{length(mismatches)} of #{Nx.size(expected)} elements differ by more than " <>
          "atol #{atol} + rtol #{rtol}: #{shown}"
      )
    end
  end
end
