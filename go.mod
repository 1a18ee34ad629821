module github.com/den-dev/den

go 1.26.8
