select 1;
++ new comment
select 2;
