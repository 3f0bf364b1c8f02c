module github.com/contextfold/contextfold

go 1.26.8
