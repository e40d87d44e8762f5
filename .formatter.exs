[
  inputs: ["{mix,.formatter}.exs", "{config,lib,test,mix,examples,bench}/**/*.{ex,exs}"],
  line_length: 100
]
