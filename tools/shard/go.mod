module github.com/den-dev/den/tools/shard

go 1.26.8
