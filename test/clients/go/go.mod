module sluiceclient

go 1.19
