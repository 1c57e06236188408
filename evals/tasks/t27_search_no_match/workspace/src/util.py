# TODO: tidy
X = 1
