defmodule Nx.Vulkan.ResidencyRegister do
  @moduledoc false
  # Doctests whose work leaves the device, by function, with the reason (see
  # test/nx_vulkan/nx_doctest_test.exs). An entry is removed when its function becomes resident;
  # the doctest test fails for a new fallback and for a stale entry alike.
  @register %{
    Nx => %{},
    Nx.LinAlg => %{}
  }

  def registered(module), do: Map.keys(Map.fetch!(@register, module))

  # What the strict doctest module leaves out: the register, and the functions Nx deprecates,
  # whose doctests are compiled apart (see test/nx_vulkan/nx_doctest_test.exs).
  def doctest_exclusions(module), do: registered(module) ++ deprecated(module)

  # Documented functions only (doctest's :only refuses the others, such as reflect/1, which is
  # reflect/2's default-argument head).
  def deprecated(module) do
    {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(module)
    documented = for {{:function, fun, arity}, _, _, %{}, _} <- docs, do: {fun, arity}

    for {function, _} <- module.__info__(:deprecated),
        function in documented and function not in registered(module),
        do: function
  end

  def reason(module, fun), do: get_in(@register, [module, fun])

  @doc "The register entry a doctest test belongs to: {module, {fun, arity}} or {module, :moduledoc}."
  def entry_of(test_name) do
    case Regex.run(
           ~r/^doctest (?:module ([\w.]+)|([\w.]+)\.([^.\/\s]+)\/(\d+)) \(/,
           Atom.to_string(test_name)
         ) do
      [_, module] ->
        {Module.concat([module]), :moduledoc}

      [_, "", module, fun, arity] ->
        {Module.concat([module]), {String.to_atom(fun), String.to_integer(arity)}}
    end
  end

  @table __MODULE__

  def start, do: :ets.new(@table, [:named_table, :public, :set, write_concurrency: true])

  @doc """
  Counts a doctest as `:resident` (strict) or `:registered` (allowed to fall back), and whether it
  is a complex-number doctest: one whose example text builds or prints complex numbers. The
  issue's residency target counts non-complex doctests.
  """
  def count(kind, context) do
    :ets.insert(@table, {{:test, context.test}, kind, complex_doctest?(context)})
  end

  # A doctest is complex when its example text (lines doctest_line..end_line of the module's
  # source) names a complex type or constant, or prints a complex literal such as 1.0+2.0i.
  @complex_text ~r/Complex\.|:c, ?(64|128)|\bc(64|128)\b|Constants\.i\(|\d(\.\d+)?(e-?\d+)?[+-]\d+(\.\d+)?(e-?\d+)?i\b|\bInfi\b|\bNaNi\b|-?Inf[+-]/
  defp complex_doctest?(%{doctest: module, doctest_line: first, doctest_data: %{end_line: last}}) do
    module.module_info(:compile)[:source]
    |> to_string()
    |> source_lines()
    |> Enum.slice((first - 1)..(last - 1)//1)
    |> Enum.any?(&Regex.match?(@complex_text, &1))
  end

  defp source_lines(path) do
    key = {:source, path}

    case :persistent_term.get(key, nil) do
      nil ->
        lines = path |> File.read!() |> String.split("\n")
        :persistent_term.put(key, lines)
        lines

      lines ->
        lines
    end
  end

  # Resident: every doctest that ran without a host fallback, strict ones and registered ones.
  def report do
    tests = for {{:test, test}, kind, complex?} <- :ets.tab2list(@table), do: {test, kind, complex?}
    reasons = Nx.Vulkan.Fallback.tag_reasons()

    doctests = MapSet.new(tests, &elem(&1, 0))

    fell_back =
      for {{{_module, _fun} = entry, test}, n} <- Nx.Vulkan.Fallback.tag_counts(),
          n > 0 and MapSet.member?(doctests, test),
          into: %{},
          do: {test, {entry, reasons[{entry, test}]}}

    if tests != [] do
      share("Nx doctest residency", tests, fell_back)

      share(
        "  non-complex doctests (the issue's target, >= 97%)",
        Enum.reject(tests, &elem(&1, 2)),
        fell_back
      )

      if fell_back == %{},
        do: IO.puts("  doctests that leave the device: none"),
        else: IO.puts("  doctests that leave the device, by register entry (last fallback seen):")

      fell_back
      |> Enum.group_by(fn {_test, {entry, _}} -> entry end, fn {test, {_, reason}} ->
        {test, reason}
      end)
      |> Enum.sort()
      |> Enum.each(fn {{module, {fun, arity}}, list} ->
        IO.puts("    #{inspect(module)}.#{fun}/#{arity}: #{length(list)} (#{elem(hd(list), 1)})")
      end)
    end
  end

  defp share(label, tests, fell_back) do
    total = length(tests)
    left = Enum.count(tests, fn {test, _, _} -> Map.has_key?(fell_back, test) end)

    if total > 0 do
      IO.puts(
        "\n#{label}: #{total - left} of #{total} stay on the device " <>
          "(#{Float.round(100 * (total - left) / total, 1)}%); #{left} fall back"
      )
    end
  end
end
