// The sandbox ("pause") image's binary: standard library only, built static.
module stateful-jobset/localcluster/pause

go 1.26.0
