defmodule Nx.Vulkan.ServingTest do
  use ExUnit.Case, async: true

  # A small model: each caller's row goes through a dot, a sigmoid and a row sum.
  defp model(x),
    do:
      x |> Nx.dot(Nx.divide(Nx.iota({16, 8}, type: :f32), 100)) |> Nx.sigmoid() |> Nx.sum(axes: [1])

  test "batched_run with concurrent callers: every caller gets its own row's result" do
    serving =
      Nx.Serving.new(fn opts -> Nx.Defn.jit(&model/1, opts) end)
      |> Nx.Serving.batch_size(8)

    name = :"#{__MODULE__}.Serving"
    start_supervised!({Nx.Serving, serving: serving, name: name, batch_timeout: 5})
    input = fn i -> Nx.iota({16}, type: :f32) |> Nx.multiply(i) |> Nx.divide(64) end

    for _round <- 1..5 do
      results =
        1..64
        |> Enum.map(fn i ->
          Task.async(fn ->
            Nx.Serving.batched_run(name, Nx.Batch.stack([input.(i)])) |> Nx.to_binary()
          end)
        end)
        # Bounded by the test's timeout: lavapipe's threads run niced beside the async tests.
        |> Task.await_many(:infinity)

      expected =
        Nx.with_default_backend(Nx.BinaryBackend, fn ->
          for i <- 1..64, do: model(Nx.new_axis(input.(i), 0)) |> Nx.to_binary()
        end)

      for {got, want} <- Enum.zip(results, expected) do
        assert_in_delta hd(Nx.to_list(Nx.from_binary(got, :f32))),
                        hd(Nx.to_list(Nx.from_binary(want, :f32))),
                        1.0e-5
      end
    end
  end
end
